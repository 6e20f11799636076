"""What Hypercorn has no option for, in front of the served app in each worker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.body_limits import BODY_HEADERS, MULTIPLEXED, head_size
from serving.head_limits import TOO_LARGE_BODY

DISCONNECT: Message = {"type": "http.disconnect"}


class HTTP2Off:
    """WEBSERVER_HTTP2=false: Hypercorn answers cleartext HTTP/2 (h2c) whatever it is
    told, so an HTTP/2 request gets 505 here instead of being served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Plain functions handing back the app's awaitable, here and below: a coroutine
        # of each layer's own would cost every request.
        if scope.get("http_version") == "2":
            return refuse_http2(send)
        return self.app(scope, receive, send)


async def refuse_http2(send: Send) -> None:
    await send({"type": "http.response.start", "status": 505,
                "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


class HeadSizeLimit:
    """WEBSERVER_MAX_HEADER_SIZE for a head that arrived whole: h11's
    `h11_max_incomplete_size` only bounds one still arriving, so a longer head read at
    once reaches the app; it gets 431 and the connection closes, as on the others."""

    def __init__(self, app: ASGIApp, max_header_size: int) -> None:
        self.app, self.max_size = app, max_header_size

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] == "http" and head_size(scope) > self.max_size:
            return refuse_head(send)
        return self.app(scope, receive, send)


async def refuse_head(send: Send) -> None:
    await send({"type": "http.response.start", "status": 431,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(TOO_LARGE_BODY)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": TOO_LARGE_BODY})


class UnreadBody:
    """An answer given before the request's body has all arrived (413, 408, 431, a route
    that does not read it) closes the connection, as on the other engines.

    Hypercorn hands a request's body to the app through a queue of at most
    `max_app_queue_size` (10) events, and puts the `http.disconnect` on it from inside
    the app's last `send` of its answer, before it closes the connection. With the rest
    of the body filling the queue, that put waits for a read the app never does: the
    answer is written but the connection stays open, the app's call never returns, and
    a stop waits out the grace period for it. So from that last send until the app
    returns, the rest of the body is read and dropped here (about a queue's worth:
    Hypercorn queues no more once the disconnect is in), and a read of the app's gets
    the disconnect. An HTTP/1 request with neither header has no body to leave unread."""

    def __init__(self, app: ASGIApp, on_trio: bool = False) -> None:
        self.app = app
        # trio starts a task only in a nursery: one around each request with a body there.
        self.watched = self.watched_on_trio if on_trio else self.watched_on_asyncio

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        if scope["http_version"] in MULTIPLEXED:  # a body need not announce itself
            return self.watched(scope, receive, send)
        for name, _ in scope["headers"]:
            if name in BODY_HEADERS:
                return self.watched(scope, receive, send)
        return self.app(scope, receive, send)

    async def watched_on_asyncio(self, scope: Scope, receive: Receive, send: Send) -> None:
        ended = False
        dropping: asyncio.Task[None] | None = None

        async def received() -> Message:
            nonlocal ended
            if dropping is not None:  # answered: what is left to hear is the disconnect
                await asyncio.shield(dropping)
                return DISCONNECT
            message = await receive()
            ended = ended or not message.get("more_body", False)
            return message

        async def sent(message: Message) -> None:
            nonlocal dropping
            if (not ended and dropping is None and message["type"] == "http.response.body"
                    and not message.get("more_body", False)):
                dropping = asyncio.create_task(drop_until_disconnect(receive))
            await send(message)

        try:
            await self.app(scope, received, sent)
        finally:
            if dropping is not None:
                dropping.cancel()

    async def watched_on_trio(self, scope: Scope, receive: Receive, send: Send) -> None:
        import trio

        ended = False
        dropped: trio.Event | None = None

        async def drop() -> None:
            await drop_until_disconnect(receive)
            dropped.set()

        async def received() -> Message:
            nonlocal ended
            if dropped is not None:  # answered: what is left to hear is the disconnect
                await dropped.wait()
                return DISCONNECT
            message = await receive()
            ended = ended or not message.get("more_body", False)
            return message

        async with trio.open_nursery() as nursery:
            async def sent(message: Message) -> None:
                nonlocal dropped
                if (not ended and dropped is None and message["type"] == "http.response.body"
                        and not message.get("more_body", False)):
                    dropped = trio.Event()
                    nursery.start_soon(drop)
                await send(message)

            try:
                await self.app(scope, received, sent)
            finally:
                nursery.cancel_scope.cancel()


async def drop_until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
