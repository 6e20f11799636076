"""WebSockets: an idle timeout and a cap on open connections, the same on every engine.

No engine closes an idle WebSocket (a ping proves the peer alive, not busy) or caps how
many are open. Here: WEBSERVER_WS_IDLE_TIMEOUT closes a connection on which no message
went either way for that long while the app waits (1001); WEBSERVER_WS_MAX_CONNECTIONS
refuses a handshake past that many in the worker (1013); WEBSERVER_WS_MAX_MESSAGE_SIZE
closes on a larger message (1009; granian reads it whole first). A refusal is a close
before the accept, which every engine answers 403 alike, where a denial response would
differ by engine (docs/security.md). HTTP requests pass through untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.settings import get_settings

GOING_AWAY = 1001
POLICY = 1008  # policy violation: a refused Origin, a dependency's refusal
TOO_BIG = 1009
TRY_AGAIN_LATER = 1013
DENIAL = "websocket.http.response."  # the prefix of the denial response's messages


class WebSocketLimitsMiddleware:
    open_connections = 0  # in this worker, whatever the instance

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        settings = get_settings()
        self.idle: float | None = settings.ws_idle_timeout or None
        self.cap: int | None = settings.ws_max_connections or None
        self.max_message: int | None = settings.ws_max_message_size or None

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable for HTTP.
        if scope["type"] != "websocket":
            return self.app(scope, receive, send)
        return self.limited(scope, receive, send)

    async def limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        counter = WebSocketLimitsMiddleware
        if self.cap is not None and counter.open_connections >= self.cap:
            await refuse(send, TRY_AGAIN_LATER)
            return
        counter.open_connections += 1
        try:
            watched = Watched(receive, send, idle=self.idle, max_message=self.max_message)
            await self.app(scope, watched.receive, watched.send)
        finally:
            counter.open_connections -= 1


async def refuse(send: Send, code: int) -> None:
    """Refuse a handshake: a close before the accept, answered 403 by every engine."""
    await send({"type": "websocket.close", "code": code})


def too_big(message: Message, cap: int) -> bool:
    data = message.get("bytes")
    if data is not None:
        return len(data) > cap
    text = message.get("text") or ""  # a character is 1-4 bytes: encode only when it counts
    return len(text) > cap or (4 * len(text) > cap and len(text.encode()) > cap)


@asynccontextmanager
async def trio_timeout_at(deadline: float) -> AsyncIterator[None]:
    """asyncio.timeout_at on trio: TimeoutError once trio's clock passes `deadline`."""
    import trio

    try:
        with trio.fail_at(deadline):
            yield
    except trio.TooSlowError:
        raise TimeoutError from None


class Watched:
    """`receive` and `send` of one WebSocket: the idle time, the message size, and a
    denial response turned into the refusal every engine gives alike."""

    __slots__ = ("accepted", "closed", "idle", "last", "max_message", "time", "timeout_at",
                 "upstream_receive", "upstream_send")

    def __init__(self, receive: Receive, send: Send, *, idle: float | None,
                 max_message: int | None) -> None:
        self.upstream_receive = receive
        self.upstream_send = send
        self.idle = idle
        self.max_message = max_message
        self.accepted = False
        try:
            self.time: Callable[[], float] = asyncio.get_running_loop().time
            self.timeout_at: Callable[[float], AbstractAsyncContextManager[object]] = (
                asyncio.timeout_at)
        except RuntimeError:  # no asyncio loop: Hypercorn's trio worker
            import trio

            self.time, self.timeout_at = trio.current_time, trio_timeout_at
        self.last = self.time()
        self.closed = False

    async def send(self, message: Message) -> None:
        if self.closed:  # closed here (idle, too big): the app's own close has nothing to do
            return
        kind = message["type"]
        if not self.accepted:
            if kind.startswith(DENIAL):  # the start becomes the refusal; its body goes
                if kind == "websocket.http.response.start":
                    await refuse(self.upstream_send, POLICY)
                return
            self.accepted = kind == "websocket.accept"
        self.last = self.time()
        await self.upstream_send(message)

    async def receive(self) -> Message:
        message = await self.received()
        if (self.max_message is not None and message["type"] == "websocket.receive"
                and too_big(message, self.max_message)):
            return await self.close(TOO_BIG, "message too big")
        return message

    async def received(self) -> Message:
        if self.idle is None:
            return await self.upstream_receive()
        while not self.closed:
            deadline = self.last + self.idle
            try:
                async with self.timeout_at(deadline):
                    message = await self.upstream_receive()
            except TimeoutError:
                if self.last + self.idle > deadline:
                    continue  # the app sent something meanwhile: wait on
                return await self.close(GOING_AWAY, "idle timeout")
            self.last = self.time()
            return message
        return {"type": "websocket.disconnect", "code": GOING_AWAY}

    async def close(self, code: int, reason: str) -> Message:
        self.closed = True
        await self.upstream_send({"type": "websocket.close", "code": code, "reason": reason})
        return {"type": "websocket.disconnect", "code": code}
