"""WebSockets: an idle timeout and a cap on open connections, the same on every engine.

No engine closes a WebSocket on which nothing happens (uvicorn pings only when
WEBSERVER_WS_PING_INTERVAL asks, granian and gunicorn never; a ping proves the peer
alive, not that it does anything), or caps how many are open: 2,000 idle connections
took 131 MB under uvicorn and 349 MB under granian, and stayed. Here, in the app:

- WEBSERVER_WS_IDLE_TIMEOUT: while the app waits for a message, a connection on which
  no message went either way for this many seconds is closed with code 1001 (going
  away), and the app receives a disconnect. An app that only sends is never idle.
- WEBSERVER_WS_MAX_CONNECTIONS: a handshake past this many open WebSockets in the
  worker (each worker counts its own) is answered 503, through the denial response
  uvicorn and granian offer (`websocket.http.response`); gunicorn 27's asgi worker
  offers none, and answers the close sent instead, before the accept, with 403.

HTTP requests pass through untouched: a type check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.config import get_settings

GOING_AWAY = 1001
TRY_AGAIN_LATER = 1013
DENIAL = "websocket.http.response"
BUSY = b'{"detail":"Too many WebSocket connections"}'


class WebSocketLimitsMiddleware:
    open_connections = 0  # in this worker, whatever the instance

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        settings = get_settings()
        self.idle: float | None = settings.ws_idle_timeout or None
        self.cap: int | None = settings.ws_max_connections or None

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable for HTTP.
        if scope["type"] != "websocket":
            return self.app(scope, receive, send)
        return self.limited(scope, receive, send)

    async def limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        counter = WebSocketLimitsMiddleware
        if self.cap is not None and counter.open_connections >= self.cap:
            await refuse(scope, send)
            return
        counter.open_connections += 1
        try:
            if self.idle is None:
                await self.app(scope, receive, send)
            else:
                watched = IdleWatch(receive, send, self.idle)
                await self.app(scope, watched.receive, watched.send)
        finally:
            counter.open_connections -= 1


async def refuse(scope: Scope, send: Send) -> None:
    if DENIAL in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(BUSY)), (b"retry-after", b"5")]})
        await send({"type": "websocket.http.response.body", "body": BUSY})
    else:
        await send({"type": "websocket.close", "code": TRY_AGAIN_LATER})


class IdleWatch:
    """`receive` and `send` noting each message; `receive` gives up once idle."""

    __slots__ = ("closed", "last", "loop", "seconds", "upstream_receive", "upstream_send")

    def __init__(self, receive: Receive, send: Send, seconds: float) -> None:
        self.upstream_receive = receive
        self.upstream_send = send
        self.seconds = seconds
        self.loop = asyncio.get_running_loop()
        self.last = self.loop.time()
        self.closed = False

    async def send(self, message: Message) -> None:
        if self.closed:  # closed for idleness: the app's own close has nothing to do
            return
        self.last = self.loop.time()
        await self.upstream_send(message)

    async def receive(self) -> Message:
        while not self.closed:
            deadline = self.last + self.seconds
            try:
                async with asyncio.timeout_at(deadline):
                    message = await self.upstream_receive()
            except TimeoutError:
                if self.last + self.seconds > deadline:
                    continue  # the app sent something meanwhile: wait on
                self.closed = True
                await self.upstream_send({"type": "websocket.close", "code": GOING_AWAY,
                                          "reason": "idle timeout"})
                break
            self.last = self.loop.time()
            return message
        return {"type": "websocket.disconnect", "code": GOING_AWAY}
