"""One Hypercorn worker, in a spawned process: the served app on the supervisor's
listeners, stopped by SIGTERM (or SIGINT) in order: `server_stopping`, then Hypercorn's
own stop (its listeners closed, the requests in flight given the grace period, the
idle connections closed, the lifespan's shutdown). It tells the supervisor it serves
once the lifespan has started, and stops itself after WEBSERVER_WORKER_MAX_REQUESTS
(plus up to 10 % jitter), for the supervisor to replace it."""

from __future__ import annotations

import random
import signal
import socket
from collections.abc import Callable
from multiprocessing.connection import Connection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.stopping import server_stopping
from serving.served_app import create_served_app
from serving.settings import get_settings
from serving.websockets_off import WebSocketsOff

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
READY = b"ready"


class Worker:
    """The app as this worker serves it: readiness reported, requests counted."""

    def __init__(self, app: ASGIApp, ready: Connection, max_requests: int,
                 stop: Callable[[], None]) -> None:
        self.app, self.ready, self.stop = app, ready, stop
        self.requests_left = max_requests + random.randint(0, max_requests // 10) \
            if max_requests else 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self.reporting(send))
            return
        if self.requests_left and scope["type"] == "http":
            self.requests_left -= 1
            if not self.requests_left:  # recycled: this one is served, no other
                self.stop()
        await self.app(scope, receive, send)

    def reporting(self, send: Send) -> Send:
        async def reported(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                self.ready.send_bytes(READY)
        return reported


def served_app() -> ASGIApp:
    settings = get_settings()
    app = create_served_app()
    app = app if settings.websockets else WebSocketsOff(app)
    return app if settings.http2 else HTTP2Off(app)


class HTTP2Off:
    """WEBSERVER_HTTP2=false: Hypercorn answers cleartext HTTP/2 (h2c) whatever it is
    told, so an HTTP/2 request gets 505 here instead of being served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("http_version") == "2":
            await send({"type": "http.response.start", "status": 505,
                        "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def serve(loop: str, sockets: list[socket.socket], ready: Connection) -> None:
    """The spawned process's target (workers.py)."""
    for number in STOP_SIGNALS:  # stopped while it imports the app: stop
        signal.signal(number, signal.SIG_DFL)
    from serving.engines.hypercorn import config

    settings = get_settings()
    served = config(settings)
    tcp = [sock for sock in sockets if sock.type == socket.SOCK_STREAM]
    udp = [sock for sock in sockets if sock.type == socket.SOCK_DGRAM]
    served.bind = [f"fd://{sock.fileno()}" for sock in tcp]
    served.quic_bind = [f"fd://{sock.fileno()}" for sock in udp]
    if loop == "trio":
        serve_on_trio(settings.worker_max_requests, served, ready)
    else:
        serve_on_asyncio(loop, settings.worker_max_requests, served, ready)


def serve_on_asyncio(loop: str, max_requests: int, served: object, ready: Connection) -> None:
    import asyncio

    from hypercorn.asyncio import serve as hypercorn_serve

    async def main() -> None:
        stopped = asyncio.Event()

        def stop(*_: object) -> None:
            server_stopping.set()
            stopped.set()

        running = asyncio.get_running_loop()
        for number in STOP_SIGNALS:
            running.add_signal_handler(number, stop)
        app = Worker(served_app(), ready, max_requests,
                     lambda: running.call_soon_threadsafe(stop))
        await hypercorn_serve(app, served, shutdown_trigger=stopped.wait)  # type: ignore[arg-type]

    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def serve_on_trio(max_requests: int, served: object, ready: Connection) -> None:
    import trio
    from hypercorn.trio import serve as hypercorn_serve

    async def main() -> None:
        stopped = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def stop() -> None:
            server_stopping.set()
            stopped.set()

        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for _ in signals:
                    stop()
                    return

        app = Worker(served_app(), ready, max_requests,
                     lambda: token.run_sync_soon(stop))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_on_signal)
            await hypercorn_serve(app, served, shutdown_trigger=stopped.wait)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()

    trio.run(main)

