"""granian: options and run through its Python API (`granian.Granian`), and its drain.

- Workers: granian starts them and builds the loop in each; it replaces a failed one
  only with `respawn_failed_workers`.
- Stop: each worker has a listener of its own (SO_REUSEPORT) and takes granian's SIGTERM
  itself (`stop_in_order`): `server_stopping`, its listener drained, its streams ended,
  then granian's own stop (SIGINT).
- Reload: granian's own on SIGHUP, once the code on disk builds (serving/reload.py); its
  dev reloader gives up when a worker dies while starting, so the launcher restarts it.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType

from granian import Granian
from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings, HTTP2Settings
from granian.log import LogLevels

from app.core import logs, loops
from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.settings import Settings, get_settings
from app.core.stopping import OPEN_STREAMS, server_stopping
from serving import drain, reload
from serving.served_app import create_served_app, forget_your_modules

NAME = "granian"
RELOADS_ITSELF = False
# The app behind this module's factory: each worker then drains its own listener and
# ends its streams before granian stops it.
APP_TARGET = f"{__name__}:served_app"
RSS_SAMPLE_SECONDS = 5
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# granian's workers stop on either: SIGTERM is the drain's, SIGINT stays granian's.
HANDED_TO_GRANIAN = signal.SIGINT
Handler = Callable[[int, FrameType | None], object]


def options(settings: Settings, loop: str) -> dict[str, object]:
    """granian's arguments for this run, by granian's names."""
    return dict(
        target=APP_TARGET,
        factory=True,
        address=settings.host,
        port=settings.port,
        # granian's default interface is RSGI; FastAPI speaks ASGI.
        interface=Interfaces.ASGI,
        workers=settings.workers,
        runtime_threads=settings.threads,
        loop=Loops(loops.engine_value(NAME, loop)),
        # granian's auto answers HTTP/2 too; pin HTTP/1 unless asked, like uvicorn.
        http=HTTPModes.auto if settings.http2 else HTTPModes.http1,
        websockets=settings.websockets,
        backlog=settings.backlog,
        backpressure=settings.max_concurrency or None,
        # Its header read timeout also closes an idle keep-alive connection (measured): one
        # timer for both, so the longer; its buffer is the most a request head may take.
        http1_settings=HTTP1Settings(
            header_read_timeout=max(settings.keepalive_timeout, settings.header_timeout) * 1000,
            max_buffer_size=settings.max_header_size),
        http2_settings=HTTP2Settings(max_headers_size=settings.max_header_size),
        log_level=LogLevels(settings.log_level),
        # Its lines on stderr, stdout being the access log's alone (docs/security.md);
        # granian merges this dict into its own key by key, so its handlers are replaced.
        log_dictconfig={"handlers": {"console": stderr_handler("generic"),
                                     "access": stderr_handler("access")},
                        **logs.engine_formatters(("generic", "access"), settings.log_format)},
        log_access=False,  # the app's own access log, the same on every engine
        respawn_failed_workers=settings.respawn_failed_workers,
        workers_lifetime=settings.worker_lifetime or None,
        workers_max_rss=settings.worker_max_memory or None,
        # granian samples RSS every 30 s by default; a leak is caught sooner this way.
        rss_sample_interval=RSS_SAMPLE_SECONDS,
        workers_kill_timeout=settings.graceful_timeout,
        # TLS, checked by the settings (app/core/tls.py); with HTTP/2 on, ALPN offers h2.
        ssl_cert=Path(settings.tls_certfile) if settings.tls_certfile else None,
        ssl_key=Path(settings.tls_keyfile) if settings.tls_keyfile else None,
    )


def stderr_handler(formatter: str) -> dict[str, str]:
    return {"formatter": formatter, "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr"}


def run(settings: Settings, loop: str) -> None:
    # A forked worker would run the launcher's SIGTERM handler (the drain's) until it
    # builds the app, and lose the signal: blocked across the fork, reset in the child.
    os.register_at_fork(before=block_stop_signals, after_in_parent=unblock_stop_signals,
                        after_in_child=default_stop_signals)
    server = Granian(**options(settings, loop))  # type: ignore[arg-type]
    granian_started = threading.Event()

    @server.on_startup
    def check_before_reload() -> None:
        # Runs in granian's main process once it has set its own signal handlers. Its
        # own reload stops the server when a new worker fails to start.
        granian_started.set()
        signal.signal(signal.SIGHUP, checked_reload(signal.getsignal(signal.SIGHUP),
                                                    settings.log_format))

    try:
        server.serve()
    except Exception:
        if not granian_started.is_set():
            raise
        # Its supervising loop ended (a worker spawned and dead before granian handed it
        # what to run breaks multiprocessing's pipe): its workers would serve on, deaf.
        logs.announce("granian stopped supervising its workers: stopping them and exiting, "
                      "for the service manager to restart the server\n"
                      + traceback.format_exc().rstrip(), settings.log_format,
                      level=logging.ERROR)
        try:
            server.shutdown(exit_code=1)
        finally:
            stop_unlisted_workers(timeout=settings.graceful_timeout)


def stop_unlisted_workers(timeout: float) -> None:
    """A worker granian took off its list to replace it (a reload, a recycle) when the
    replacement failed: its shutdown does not stop that one."""
    for worker in multiprocessing.active_children():
        worker.terminate()
        worker.join(timeout)
        if worker.is_alive():
            worker.kill()


def block_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def unblock_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def default_stop_signals() -> None:
    """In a forked worker: a stop that came meanwhile is delivered, and stops it."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    unblock_stop_signals()


def checked_reload(handler: Handler, log_format: str) -> Handler:
    """granian's SIGHUP handler, once the code on disk builds (serving/reload.py)."""
    def log(level: int, line: str) -> None:
        logs.announce(line, log_format, level=level)

    def handle(sig: int, frame: FrameType | None) -> None:
        def then() -> None:
            if reload.accepted("granian", log):
                handler(sig, frame)

        threading.Thread(target=then, name="reload check", daemon=True).start()

    return handle


def served_app() -> ASGIApp:
    """In each worker: the served app, which drains the worker's own listener and ends
    what is open before granian stops the worker."""
    # Until granian sets its own handlers once the app is built, a worker stopped while it
    # imports the app must stop (a forked one is reset at the fork too: run()).
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    forget_your_modules()  # your app/custom.py read from disk, not the launcher's copy
    served, settings = create_served_app(), get_settings()

    def app(scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the served app's coroutine: granian awaits what
        # the call returns, and a coroutine of its own here cost every request.
        if scope["type"] == "lifespan":  # on the worker's loop, granian's handlers set
            started = threading.Event()
            stop_in_order(asyncio.get_running_loop(), settings, started)
            return served(scope, receive, noting_startup(send, started))
        return served(scope, receive, send)

    return app


def noting_startup(send: Send, started: threading.Event) -> Send:
    async def send_noting(message: Message) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()
        await send(message)

    return send_noting


def stop_in_order(loop: asyncio.AbstractEventLoop, settings: Settings,
                  started: threading.Event) -> None:
    """The worker's SIGTERM (granian's main process stops it with one on a stop, a
    reload or a recycle): first `server_stopping`, then its own listener drained, then
    the streams ended (app/middleware/open_streams.py), and only then granian's own stop, which
    would reset the queued connections and drop the WebSockets without a close frame.
    A worker still starting serves nothing: it stops at once, as while it imports."""
    def begin(*_: object) -> None:
        if not started.is_set():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        if server_stopping.is_set():  # a second signal: stop now
            signal.raise_signal(HANDED_TO_GRANIAN)
            return
        server_stopping.set()
        loop.call_soon_threadsafe(lambda: loop.create_task(then(), name="stop in order"))

    async def then() -> None:
        await asyncio.to_thread(drain.drain_own_listeners, settings.port,
                                settings.graceful_timeout)
        await OPEN_STREAMS.ended(timeout=settings.graceful_timeout)
        signal.raise_signal(HANDED_TO_GRANIAN)

    try:
        loop.add_signal_handler(signal.SIGTERM, begin)  # replaces granian's, on this loop
    except NotImplementedError:  # a loop without signal handlers: as granian falls back
        signal.signal(signal.SIGTERM, begin)
