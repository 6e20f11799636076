"""What a request may send, the same on every engine: headers, body size, body time.

The engines neither bound nor time a body, nor answer a malformed one alike. Before any
route: over MAX_HEADERS header lines, or an HTTP/2 or /3 head over
WEBSERVER_MAX_HEADER_SIZE, 431; a body over WEBSERVER_MAX_BODY_SIZE, 413 (an announced
one before a byte is read); a client that kept the app waiting past WEBSERVER_BODY_TIMEOUT,
408; a chunked body cut short, or both Content-Length and Transfer-Encoding (smuggling),
400; a read past WEBSERVER_BODY_BUDGET, 503. Each closes the connection; those raised
while a route reads are HTTPExceptions, which your handlers answer too (docs/security.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from app.core import layers
from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.body_limits import BODY_HEADERS, MULTIPLEXED, BodyLimit, head_size
from app.core.framework import StarletteHTTPException as HTTPException
from app.core.settings import get_settings
from app.middleware.body_budget import BodyBudget

MAX_HEADERS = 100  # granian's (hyper's), zttp's and gunicorn's own cap, not a setting
CLOSE = {"Connection": "close"}
RETRY_AFTER = {"Retry-After": "1"}  # the budget frees as requests end, most within a second
NOT_A_BYTE = -1  # a limit that refuses the first read


class Refusal(HTTPException):
    """A request refused for what it sent; the connection is closed after the answer."""

    def __init__(self, status_code: int, detail: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status_code, detail=detail,
                         headers={**CLOSE, **(headers or {})})

    def body(self) -> bytes:
        return b'{"detail":"%s"}' % self.detail.encode()


TOO_MANY_HEADERS = Refusal(431, "Request Header Fields Too Large")
TOO_LARGE = Refusal(413, "Content Too Large")
TOO_SLOW = Refusal(408, "Request Timeout")
INCOMPLETE = Refusal(400, "Incomplete request body")
AMBIGUOUS = Refusal(400, "Both Content-Length and Transfer-Encoding")
BUSY = Refusal(503, "Too many request bodies at once: retry", RETRY_AFTER)


def refusal(kind: Refusal) -> Refusal:
    """A fresh exception (a raised one keeps its traceback)."""
    return Refusal(kind.status_code, kind.detail, kind.headers)


async def answer(send: Send, kind: Refusal) -> None:
    body = kind.body()
    await send({"type": "http.response.start", "status": kind.status_code, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
        *((name.lower().encode(), value.encode()) for name, value in kind.headers.items())]})
    await send({"type": "http.response.body", "body": body})


class RequestLimitsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        settings = get_settings()
        self.max_body: int | None = settings.max_body_size or None
        self.timeout: float | None = settings.body_timeout or None
        self.max_head = settings.max_header_size
        self.budget = BodyBudget(settings.body_budget or None)
        # When built: your middleware modules may import this one.
        self.routes: tuple[BodyLimit, ...] = tuple(layers.declared("BODY_LIMITS", ()))

    def limits(self, scope: Scope) -> tuple[int | None, float | None]:
        """The body size and time for this request: a route's own, or the settings'."""
        if self.routes:
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root):]
            for route in self.routes:
                if route.matches(path):
                    return route.max_size or None, route.timeout or None
        return self.max_body, self.timeout

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable when there is no body.
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        if len(scope["headers"]) > MAX_HEADERS:
            return answer(send, TOO_MANY_HEADERS)
        return self.body_or_not(scope, receive, send)

    def body_or_not(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        for name, _ in scope["headers"]:
            if name in BODY_HEADERS:
                return self.with_body(scope, receive, send)
        if scope["http_version"] in MULTIPLEXED:  # a body need not announce itself
            return self.with_body(scope, receive, send)
        return self.app(scope, receive, send)  # HTTP/1 without either: no body

    def with_body(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """A request that has or may have a body (and, over HTTP/2 and /3, any)."""
        if scope["http_version"] in MULTIPLEXED and head_size(scope) > self.max_head:
            return answer(send, TOO_MANY_HEADERS)  # the same 431; HTTP/1.1's is the engine's
        max_body, timeout = self.limits(scope)
        length = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        if length is not None and chunked:
            return answer(send, AMBIGUOUS)  # not a byte of it read
        if length is not None:
            try:
                size: int | None = int(length)
            except ValueError:  # the engines refuse it first
                size = None
            if size is not None:
                if max_body is not None and size > max_body:
                    return answer(send, TOO_LARGE)  # not a byte of it read
                if size == 0 or (timeout is None and self.budget.limit is None):
                    return self.app(scope, receive, send)  # the engine keeps to the length
                return self.guarded(scope, receive, send, None, timeout, chunked=False)
        return self.guarded(scope, receive, send, max_body, timeout, chunked=chunked)

    def counted(self, receive: Receive, limit: int | None, timeout: float | None,
                chunked: bool) -> Body:
        return Body(receive, limit, timeout, chunked, self.budget)

    async def guarded(self, scope: Scope, receive: Receive, send: Send, limit: int | None,
                      timeout: float | None, *, chunked: bool) -> None:
        body = self.counted(receive, limit, timeout, chunked)
        started = False

        def watched(message: Message) -> Awaitable[None]:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            return send(message)

        try:
            await self.app(scope, body.receive, watched)
        except Refusal as error:
            # Raised outside FastAPI's handlers (a middleware of yours reading the body).
            if started:
                raise
            await answer(send, error)
        finally:
            body.finish()  # a body the app did not read to its end is no longer timed
            body.give_back()  # the app holds none of it now


class BodySizeBeforeYoursMiddleware(RequestLimitsMiddleware):
    """The size limits again, just before your middleware, when you have any: a
    middleware of yours that reads the body (`await request.body()` in a
    BaseHTTPMiddleware's dispatch, a request logger) reads it from the engine, outside
    the template's limits, so a 1 GiB upload would be held whole. Here every body is
    counted as it is read, announced or chunked, and the read after the one that
    passed the limit is refused (413): no more than the limit and one chunk is held.

    The read that passes the limit goes on, so when a route reads the body the limits
    inside yours refuse it first: a refusal raised here under a BaseHTTPMiddleware's
    call_next would cross its task groups and become a 500. Not the time limit
    either: its timer cancels the waiting task, which there is one of theirs."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # The header count is answered inside yours (with your headers), as before.
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        return self.body_or_not(scope, receive, send)

    def with_body(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        max_body, _ = self.limits(scope)
        if max_body is None:
            return self.app(scope, receive, send)
        for name, value in scope["headers"]:
            # Announced over the limit: the template answers 413 inside yours without
            # reading it, so only a middleware of yours ever reads it; refuse that read.
            if name == b"content-length" and value.isdigit() and int(value) > max_body:
                return self.guarded(scope, receive, send, NOT_A_BYTE, None, chunked=False)
        return self.guarded(scope, receive, send, max_body, None, chunked=False)

    def counted(self, receive: Receive, limit: int | None, timeout: float | None,
                chunked: bool) -> Body:
        # No budget here: the layer inside yours counts the same bytes once.
        return BodyPastTheLimit(receive, limit, timeout, chunked, None)


class Body:
    """The engine's `receive`, counted and timed until the body's last chunk.

    The time is what the app spent waiting for the client, whatever it did between two
    reads. One timer for the whole body (one per read costs each small chunk its own
    timer): when it fires during a wait that has used up the time, it cancels the
    waiting task, as asyncio.timeout does, and the wait ends in a 408."""

    __slots__ = ("budget", "chunked", "done", "expired", "held", "left", "limit", "loop",
                 "read", "timer", "upstream", "waiting", "waiting_since")

    def __init__(self, receive: Receive, limit: int | None, timeout: float | None,
                 chunked: bool, budget: BodyBudget | None = None) -> None:
        self.upstream = receive
        self.limit = limit
        self.budget = budget  # the worker's, each read taken from it
        self.held = 0  # bytes taken from it for this body
        self.left = timeout  # seconds of waiting still allowed; None: not timed
        self.chunked = chunked
        self.read = 0
        self.done = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.waiting: asyncio.Task[Any] | None = None
        self.waiting_since = 0.0
        self.expired = False

    async def receive(self) -> Message:
        if self.done or self.left is None:  # after the body, a disconnect is not timed
            return self.checked(await self.upstream())
        try:
            loop = self.loop = self.loop or asyncio.get_running_loop()
        except RuntimeError:  # no asyncio loop: Hypercorn's trio worker
            loop = None
        if loop is None:  # awaited out of the handler: its errors carry no RuntimeError
            return await self.receive_on_trio()
        self.waiting_since = now = loop.time()
        if self.timer is None:
            self.timer = loop.call_at(now + self.left, self.check)
        self.waiting = asyncio.current_task()
        try:
            message = await self.upstream()
        except asyncio.CancelledError:
            if not self.expired or self.waiting is None:
                raise
            self.waiting.uncancel()
            self.finish()
            raise refusal(TOO_SLOW) from None
        finally:
            self.waiting = None
            self.left -= loop.time() - self.waiting_since
        return self.checked(message)

    async def receive_on_trio(self) -> Message:
        """The same time limit on trio, which cancels by scope, not by task: one
        scope for each wait, with the time left as its deadline."""
        import trio

        assert self.left is not None
        since = trio.current_time()
        with trio.move_on_after(max(self.left, 0.0)) as wait:
            message = await self.upstream()
        self.left -= trio.current_time() - since
        if wait.cancelled_caught:
            self.finish()
            raise refusal(TOO_SLOW) from None
        return self.checked(message)

    def check(self) -> None:
        """The timer: expire a wait past the time left, else look again when it could."""
        assert self.loop is not None and self.left is not None
        self.timer = None
        if self.done or self.waiting is None:  # not waiting: the next wait sets a timer
            return
        left = self.left - (self.loop.time() - self.waiting_since)
        if left > 0:
            self.timer = self.loop.call_at(self.loop.time() + left, self.check)
        else:
            self.expired = True
            self.waiting.cancel()

    def checked(self, message: Message) -> Message:
        kind = message["type"]
        if kind == "http.request":
            size = len(message.get("body", b""))
            if self.limit is not None:
                self.read += size
                if self.read > self.limit:
                    self.finish()
                    raise refusal(TOO_LARGE)
            if self.budget is not None and size:
                if not self.budget.take(size, own=self.held):
                    self.finish()
                    raise refusal(BUSY)
                self.held += size
            if not message.get("more_body", False):
                self.finish()
        elif kind == "http.disconnect" and not self.done:
            self.finish()
            if self.chunked:
                raise refusal(INCOMPLETE)
        return message

    def give_back(self) -> None:
        if self.budget is not None:
            self.budget.give_back(self.held)
            self.held = 0

    def finish(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class BodyPastTheLimit(Body):
    """Counts without a timer, and refuses the read after the one that passed the
    limit (BodySizeBeforeYoursMiddleware says why that one goes on)."""

    __slots__ = ()

    def checked(self, message: Message) -> Message:
        assert self.limit is not None
        if self.read > self.limit:
            self.finish()
            raise refusal(TOO_LARGE)
        if message["type"] == "http.request":
            self.read += len(message.get("body", b""))
        return message
