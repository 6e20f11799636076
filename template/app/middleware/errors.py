"""Error paths answered inside the other middleware, and logged once, to stderr.

Starlette answers an exception no handler took outside every middleware, with no
request id, security headers or access line. Here, inside them, it gets Starlette's
plain 500 (or your handler's for `Exception` or 500) after one ERROR line with its
traceback. FastAPI's own handlers run further in, untouched; with `debug=True`,
Starlette's debug page answers. A client that left before its body was read is no error
of the app: no traceback, and a 499 (nginx's "client closed request") in the access log.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Awaitable

from app.core import logs
from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.framework import (
    ClientDisconnect,
    PlainTextResponse,
    Request,
    Response,
    run_in_threadpool,
)
from app.middleware.messages import Message

LOGGER = logging.getLogger("app.errors")
CLIENT_CLOSED = 499
LOG_FORMAT = "[%(levelname)s] %(name)s: %(message)s"
HANDLER_NAME = "app.stderr"  # the handler configure_logging adds
# uvicorn logs a text frame that is not UTF-8 as an ERROR with a traceback, though it
# is the client's fault and uvicorn answers it properly (close code 1007).
UVICORN_BAD_FRAME = "Invalid UTF-8 sequence received from client."


class ServerErrorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        def send_watched(message: Message) -> Awaitable[None]:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            return send(message)

        try:
            await self.app(scope, receive, send_watched)
        except Exception as error:
            await self.recover(scope, receive, send, error, started=started)

    async def recover(self, scope: Scope, receive: Receive, send: Send, error: Exception,
                      *, started: bool) -> None:
        """Answer what an exception from inside leaves unanswered, or raise it again.
        (Also called by the fused layer, app/middleware/fused_layers.py.)"""
        if isinstance(error, ClientDisconnect):
            if not started:
                await send({"type": "http.response.start", "status": CLIENT_CLOSED,
                            "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
            return
        app = scope.get("app")
        if started or getattr(app, "debug", False):
            raise error  # the engine logs it and closes the connection: no second answer
        # The path quoted (repr): a %0a in it cannot forge a second log line.
        LOGGER.error("%s %r failed (request id %s)", scope["method"], scope["path"],
                     scope.get("state", {}).get("request_id", "-"), exc_info=error)
        response = await error_response(app, Request(scope, receive), error)
        await response(scope, receive, send)


async def error_response(app: object, request: Request, error: Exception) -> Response:
    """The app's handler for Exception or 500 when it has one, else Starlette's 500."""
    handlers = getattr(app, "exception_handlers", {})
    handler = handlers.get(500) or handlers.get(Exception)
    if handler is None:
        return PlainTextResponse("Internal Server Error", status_code=500)
    if inspect.iscoroutinefunction(handler):
        return await handler(request, error)
    return await run_in_threadpool(handler, request, error)


class _OneLine(logging.Filter):
    """A client's invalid WebSocket frame as one WARNING line instead of a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == UVICORN_BAD_FRAME:
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def configure_logging(level: str, log_format: str = "text") -> None:
    """The app's log lines on stderr, where every engine writes its own (stdout is the
    access log's): loggers under `app` at WEBSERVER_LOG_LEVEL, others at WARNING, as
    text or JSON with the request's ids (WEBSERVER_LOG_FORMAT, app/core/logs.py). A
    handler you set on the root logger yourself is kept."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(HANDLER_NAME)
        root.addHandler(handler)
    for handler in root.handlers:
        if handler.get_name() == HANDLER_NAME:
            handler.setFormatter(logs.formatter(log_format))
    logging.getLogger("app").setLevel(level.upper())
    engine = logging.getLogger("uvicorn.error")
    if not any(isinstance(known, _OneLine) for known in engine.filters):
        engine.addFilter(_OneLine())
