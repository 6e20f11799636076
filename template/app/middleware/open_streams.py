"""At a stop, end the streams and WebSockets still open, the same on every engine.

An engine waits for every open connection before it runs the lifespan's shutdown, and
an SSE stream never ends by itself. Once `server_stopping` is set, a stream (an answer
begun without a Content-Length) or an accepted WebSocket still open after
WEBSERVER_STREAM_STOP_TIMEOUT seconds has its task cancelled and is ended properly (the
last chunk, or close code 1012), with one INFO line. Every answer begun after the stop
says `Connection: close`, so a kept-alive client sends nothing into a closing connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Iterable

from app.core.asgi import ASGIApp, Message, Receive, Scope, Send
from app.core.framework import WebSocketDisconnect
from app.core.settings import get_settings
from app.core.stopping import OPEN_STREAMS, Open, server_stopping

CLOSE = (b"connection", b"close")
RESTART_CLOSE_CODE = 1012  # "Service Restart" in the IANA WebSocket close-code registry
logger = logging.getLogger("app.server")  # at WEBSERVER_LOG_LEVEL, as the app's lines


def asyncio_runs() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def has_length(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    # A loop, not any() over a generator: this runs on every answer. The length check
    # first: most names are not 14 bytes long.
    for name, _ in headers:  # noqa: SIM110 - any() would make a generator per answer
        if len(name) == 14 and name.lower() == b"content-length":
            return True
    return False


def closing(message: Message) -> Message:
    """An answer's start begun after the stop: its connection closes after it."""
    return {**message, "headers": [*message.get("headers", ()), CLOSE]}


def cut_by_the_stop(entry: Open, task: asyncio.Task[object]) -> bool:
    """The request's task was cancelled by end_at_stop (its stream `cut`), not by an
    engine (a client gone, a worker's own stop): the stream is then ended properly."""
    return entry.cut and task.uncancel() == 0


def noting_send(entry: Open, send: Send) -> Send:
    """`send`, noting whether the answer is a stream and when it ends (on trio, where
    each request is noted as it begins)."""

    async def noting(message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if server_stopping.is_set():  # an answer after the stop closes its connection
                message = closing(message)
            entry.streaming = not has_length(message.get("headers", ()))
        elif kind == "http.response.body":
            entry.done = not message.get("more_body", False)
        elif kind == "websocket.accept":
            entry.streaming = True
        elif kind == "websocket.close":
            entry.done = True
        await send(message)

    return noting


def noted(task: asyncio.Task[object], scope: Scope) -> Open:
    """A stream begins (its answer has no Content-Length, or a WebSocket is accepted):
    its task noted, to be ended at the stop. Its time counts from here."""
    entry = Open(scope["type"], f"{scope.get('method', 'WebSocket')} {scope.get('path', '')}",
                 streaming=True)
    OPEN_STREAMS.watch(task.get_loop())
    OPEN_STREAMS.open[task] = entry
    return entry


class OpenStreamsMiddleware:
    """Notes each stream's task as its answer begins; ends it at the stop.

    The outermost of the app's own layers after the probes and the proxy headers
    (app/middleware/__init__.py), so that a stream of any route, behind any middleware of yours, is
    ended; next to the template's other layers it runs in the fused one
    (app/middleware/fused_layers.py). Only streams are noted: an answer with a
    Content-Length (most) costs a look at its start's headers and nothing else
    (docs/benchmarks.md)."""

    def __init__(self, app: ASGIApp, stream_stop_timeout: float | None = None) -> None:
        self.app = app
        if stream_stop_timeout is None:  # a stream ends within the grace period
            settings = get_settings()
            stream_stop_timeout = min(settings.stream_stop_timeout, settings.graceful_timeout)
        OPEN_STREAMS.stop_timeout = stream_stop_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no asyncio loop (awaited below, out of this handler)
            task = None
        if task is None or kind not in ("http", "websocket"):
            if task is None and not asyncio_runs():  # Hypercorn's trio worker
                await self.on_trio(scope, receive, send)
                return
            if kind == "lifespan":
                OPEN_STREAMS.watch(asyncio.get_running_loop())
            await self.app(scope, receive, send)
            return
        entry: Open | None = None

        def noting(message: Message) -> Awaitable[None]:
            # Few names from outside: each is a cell made per request.
            nonlocal entry
            kind = message["type"]
            if kind == "http.response.start":
                if server_stopping.is_set():  # an answer after the stop closes its connection
                    message = closing(message)
                if entry is None and not has_length(message.get("headers", ())):
                    entry = noted(task, scope)
            elif kind == "http.response.body":
                if entry is not None:
                    entry.done = not message.get("more_body", False)
            elif kind == "websocket.accept":
                if entry is None:
                    entry = noted(task, scope)
            elif kind == "websocket.close" and entry is not None:
                entry.done = True
            return send(message)

        try:
            await self.app(scope, receive, noting)
        except WebSocketDisconnect:
            # receive()'s end of a closed WebSocket, in a handler that does not catch it (a
            # tutorial's): the engine would log an ERROR traceback at every stop and close.
            if kind != "websocket":
                raise
        except asyncio.CancelledError:
            if entry is None or not cut_by_the_stop(entry, task):
                raise
            await self.end(entry, send)
        finally:
            if entry is not None:
                OPEN_STREAMS.open.pop(task, None)  # an app of this template inside another

    async def on_trio(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The same on trio: a request runs in a cancel scope of its own, which the
        stop cancels (trio has no task to cancel)."""
        import trio

        kind = scope["type"]
        OPEN_STREAMS.watch_trio()
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        entry = Open(kind, f"{scope.get('method', 'WebSocket')} {scope.get('path', '')}")
        with trio.CancelScope() as cut:
            OPEN_STREAMS.on_trio[cut] = entry
            try:
                await self.app(scope, receive, noting_send(entry, send))
            except WebSocketDisconnect:
                if kind != "websocket":
                    raise
            finally:
                del OPEN_STREAMS.on_trio[cut]
        if cut.cancelled_caught:  # its own scope: the stop's cancel, not an engine's
            await self.end(entry, send)

    async def end(self, entry: Open, send: Send) -> None:
        if entry.kind == "http":
            last: Message = {"type": "http.response.body", "body": b"", "more_body": False}
        else:
            last = {"type": "websocket.close", "code": RESTART_CLOSE_CODE,
                    "reason": "server restarting"}
        with contextlib.suppress(Exception):  # the client may be gone already
            await send(last)
        what = "stream" if entry.kind == "http" else "WebSocket (close code 1012)"
        logger.info(f"Stopping: ended the {what} {entry.name}, open "
                    f"{time.monotonic() - entry.since:.1f} s; it did not end within "
                    f"{OPEN_STREAMS.stop_timeout:g} s of the stop.")
