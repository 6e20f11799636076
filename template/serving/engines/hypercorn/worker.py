"""One Hypercorn worker, in a process forked from the launcher, on listeners of its
own (SO_REUSEPORT: the kernel shares the port's connections among the workers).

Stopped by SIGTERM (or SIGINT), in order: `server_stopping`; its own listener drained
(serving/drain.py), so what is queued there is served, not reset; a moment for the
connections between requests to send their next one; then Hypercorn's own stop (its
listeners closed, the requests in flight given the grace period, the idle connections
closed, the lifespan's shutdown). It tells the supervisor when it serves (once the
lifespan has started), and after WEBSERVER_WORKER_MAX_REQUESTS (plus up to a tenth,
jitter) asks to be replaced: the supervisor starts its successor, then stops it."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import socket
import sys
import traceback
import weakref
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

import anyio

from app.core import layers, logs, loops
from app.core.answers import ANSWERS
from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.settings import Settings, get_settings
from app.core.stopping import server_stopping
from serving import drain
from serving.engines.hypercorn.layers import HeadSizeLimit, HTTP2Off, UnreadBody
from serving.engines.hypercorn.options import config
from serving.engines.hypercorn.protocols import bound_protocols
from serving.served_app import create_served_app
from serving.websockets_off import WebSocketsOff

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
READY, RECYCLE = b"ready", b"recycle"  # what a worker tells the supervisor
NUDGE_EVERY = 0.2  # seconds


class Worker:
    """The app as this worker serves it: readiness reported, requests counted."""

    def __init__(self, app: ASGIApp, supervisor: Connection | None = None,
                 worker_max_requests: int = 0, tracked: bool = False) -> None:
        self.app, self.supervisor = app, supervisor
        self.requests_left = (worker_max_requests + random.randint(0, worker_max_requests // 10)
                              if worker_max_requests else 0)
        # The tasks running a request, where the stop must end them itself (on asyncio).
        self.in_flight: weakref.WeakSet[object] | None = weakref.WeakSet() if tracked else None

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable: no coroutine per request.
        if scope["type"] == "lifespan":
            return self.app(scope, receive, self.reporting(send))
        if self.in_flight is not None:
            self.in_flight.add(asyncio.current_task())
        if self.requests_left and scope["type"] == "http":
            self.requests_left -= 1
            if not self.requests_left and self.supervisor is not None:
                self.supervisor.send_bytes(RECYCLE)
        return self.app(scope, receive, send)

    def reporting(self, send: Send) -> Send:
        async def reported(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete" and self.supervisor is not None:
                self.supervisor.send_bytes(READY)
        return reported


def served_app(supervisor: Connection, loop: str) -> ASGIApp:
    settings = get_settings()
    app = create_served_app()
    app = app if settings.websockets else WebSocketsOff(app)
    app = app if settings.http2 else HTTP2Off(app)
    app = HeadSizeLimit(app, max_header_size=settings.max_header_size)
    return Worker(UnreadBody(app, on_trio=loop == "trio"), supervisor=supervisor,
                  worker_max_requests=settings.worker_max_requests,
                  tracked=loop == "asyncio")


def listeners(settings: Settings) -> list[socket.socket]:
    """This worker's TCP listener (and, for HTTP/3, its UDP socket) on the port."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if settings.http3 else (socket.SOCK_STREAM,)
    sockets = []
    for kind in kinds:
        sock = socket.socket(family, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if kind == socket.SOCK_STREAM:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted ones inherit it
        sock.bind((settings.host, settings.port))
        if kind == socket.SOCK_STREAM:
            sock.listen(settings.backlog)
        sockets.append(sock)
    return sockets


def serve(loop: str, supervisor: Connection) -> None:
    """The worker process's target, once forked (workers.py)."""
    for number in STOP_SIGNALS:  # stopped while it imports the app: stop
        signal.signal(number, signal.SIG_DFL)
    settings = get_settings()
    served = config(settings)
    bound_protocols(h2c_upgrade=settings.http2 and settings.h2c_upgrade)
    sockets = listeners(settings)
    served.bind = [f"fd://{s.fileno()}" for s in sockets if s.type == socket.SOCK_STREAM]
    served.quic_bind = [f"fd://{s.fileno()}" for s in sockets if s.type == socket.SOCK_DGRAM]
    quic = [s.getsockname()[:2] for s in sockets if s.type == socket.SOCK_DGRAM]
    serve_on = serve_on_trio if loop == "trio" else serve_on_asyncio
    serve_on(loop, served_app(supervisor, loop=loop), served, settings, quic)


async def stop_in_order(settings: Settings, quic: list[tuple[str, int]],
                        spawn: Callable[..., object]) -> None:
    """The stop, on either library (AnyIO's calls run on both): `server_stopping`,
    this worker's listener drained, a moment for the idle connections' next request,
    then the QUIC nudges (`spawn` starts each as a task that lives until the exit)."""
    server_stopping.set()
    await anyio.to_thread.run_sync(drain.drain_own_listeners, settings.port,
                                   settings.graceful_timeout)
    await anyio.sleep(drain.STOP_IDLE)
    for address in quic:
        spawn(nudge, address)


def serve_on_asyncio(loop: str, app: ASGIApp, served: object, settings: Settings,
                     quic: list[tuple[str, int]]) -> None:
    from hypercorn.asyncio import serve as hypercorn_serve

    nudges: set[asyncio.Task[None]] = set()

    async def main() -> None:
        asked = asyncio.Event()
        running = asyncio.get_running_loop()
        for number in STOP_SIGNALS:
            running.add_signal_handler(number, asked.set)

        async def trigger() -> None:
            await asked.wait()
            await stop_in_order(settings, quic,
                                lambda task, *args: nudges.add(asyncio.create_task(task(*args))))
            if isinstance(app, Worker) and app.in_flight is not None:
                nudges.add(asyncio.create_task(end_after(settings.graceful_timeout,
                                                         app.in_flight)))

        await hypercorn_serve(app, served, shutdown_trigger=trigger,  # type: ignore[arg-type]
                              mode="asgi")  # its guess reads a plain function as WSGI

    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


async def end_after(graceful_timeout: float, in_flight: weakref.WeakSet[object]) -> None:
    """asyncio's own server waits for its connections to close before Hypercorn's grace
    period starts (Python 3.12+; uvloop's does not): the requests still running once the
    grace period has passed are cancelled here, so their connections close."""
    await asyncio.sleep(graceful_timeout)
    for task in list(in_flight):
        task.cancel()  # type: ignore[attr-defined]


def serve_on_trio(loop: str, app: ASGIApp, served: object, settings: Settings,
                  quic: list[tuple[str, int]]) -> None:
    """Hypercorn's trio API (`hypercorn.trio.serve`); the signals through trio's own
    receiver, the nudges in a nursery that outlives Hypercorn's."""
    import trio
    from hypercorn.trio import serve as hypercorn_serve

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async def trigger() -> None:
                    async for _ in signals:
                        break
                    await stop_in_order(settings, quic, nursery.start_soon)

                await hypercorn_serve(app, served, shutdown_trigger=trigger,  # type: ignore[arg-type]
                                      mode="asgi")
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseException as error:
        if (found := asyncio_on_trio(error)) is not None:  # the traceback, then its meaning
            traceback.print_exception(error)
            logs.announce(asyncio_on_trio_sentence(found, settings), settings.log_format,
                          level=logging.ERROR)
            sys.exit(1)
        raise


# What trio and asyncio say when asyncio is called on trio (a request gets a 500 with
# the first in its log line; the lifespan stops the worker).
ASYNCIO_ON_TRIO_ERRORS = ("no running event loop", "received unrecognized yield message")
# Packages a call passes through on its way to asyncio, never the one that made it.
PASSED_THROUGH = {"anyio", "sniffio", "trio", "starlette", "fastapi", "notslowapi", "hypercorn",
                  "serving", "contextlib", "asyncio"}


def asyncio_on_trio(error: BaseException | None, depth: int = 0) -> BaseException | None:
    """The error in `error`, the groups it holds or what it was raised from or while
    handling (Hypercorn's lifespan failure is raised while handling yours) that says
    asyncio was called on trio, or None."""
    if error is None or depth > 20:
        return None
    if isinstance(error, BaseExceptionGroup):
        return next((found for inner in error.exceptions
                     if (found := asyncio_on_trio(inner, depth + 1)) is not None), None)
    if (isinstance(error, RuntimeError | TypeError)
            and any(text in str(error) for text in ASYNCIO_ON_TRIO_ERRORS)):
        return error
    return (asyncio_on_trio(error.__cause__, depth + 1)
            or asyncio_on_trio(error.__context__, depth + 1))


def caller(error: BaseException) -> str:
    """Who called asyncio, from the traceback: 'aiosqlite, from app/custom.py line 40'."""
    project = Path(layers.__file__).resolve().parents[2]
    package, yours = "", ""
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename).resolve()
        if "site-packages" in path.parts or "dist-packages" in path.parts:
            parts = path.parts
            index = max(i for i, part in enumerate(parts) if part.endswith("-packages"))
            top = parts[index + 1].removesuffix(".py") if index + 1 < len(parts) else ""
            package = package if top in PASSED_THROUGH else top
        elif path.is_relative_to(project / "app"):
            yours = f"{path.relative_to(project).as_posix()} line {frame.lineno}"
    return ", from ".join(part for part in (package, yours) if part) or "unknown code"


def asyncio_on_trio_sentence(error: BaseException, settings: Settings) -> str:
    others = [name for name in loops.names(settings.served_loops) if name != "trio"]
    # Dropping trio from the served loops leaves the answered loop auto, if it was trio.
    loop_answer = " --data loop_policy=auto" if ANSWERS["loop_policy"] == "trio" else ""
    kept = ", ".join(others or ("asyncio", "uvloop"))
    return (f"The worker stopped: code run at its startup ({caller(error)}) calls asyncio, "
            "which does not run on trio (WEBSERVER_LOOP=trio). Use AnyIO's calls instead, "
            "or stop serving trio: drop it from the project's answers with `copier update "
            f"--trust --defaults --data 'served_loops=[{kept}]'{loop_answer}` "
            "(docs/engines.md, Hypercorn).")


async def nudge(address: tuple[str, int]) -> None:
    """Hypercorn's QUIC server notices the stop only when a datagram comes in,
    else it holds the stop for the whole grace period: one it ignores (too short for a
    QUIC header), sent to itself until the worker exits."""
    with socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET,
                       socket.SOCK_DGRAM) as sender:
        while True:
            sender.sendto(b"\0", address)
            await anyio.sleep(NUDGE_EVERY)
