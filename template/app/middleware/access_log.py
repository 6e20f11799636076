"""One access log line per request, the same on every engine (theirs are off).

WEBSERVER_ACCESS_LOG picks `text` or `json` (the fields: docs/observability.md, "Logs").
The line is written when the response ends, a pathsend included. The engines hand the
path over percent-decoded, so the text line writes a quote, a backslash and every
character that is not printable as `\\xHH`, `\\uHHHH` or `\\UHHHHHHHH` (as nginx's
`escape=default` does bytes): a caller cannot write a line or a terminal escape of its
own. The query string is not logged (it often carries tokens).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from app.core import tracing
from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.settings import get_settings
from app.middleware.messages import Message, is_response_end


def escaped(text: str) -> str:
    """`text` as it goes into a text line: itself, unless it holds a quote, a backslash
    or a character that is not printable (the check is all a usual request pays)."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return "".join(char if char.isprintable() and char not in '"\\' else _code(char)
                   for char in text)


def _code(char: str) -> str:
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


class AccessLogMiddleware:
    """The text line: `TIME CLIENT "METHOD PATH" STATUS DURATIONms REQUEST_ID`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stream = sys.stdout
        self.traced = tracing.configured()  # the trace id, last, when traces are on

    def line(self, fields: dict[str, Any]) -> str:
        # An f-string: str.format(**fields) cost more than the escaping checks.
        return (f'{fields["time"]} {escaped(fields["client"])} '
                f'"{escaped(fields["method"])} {escaped(fields["path"])}" {fields["status"]} '
                f'{fields["duration_ms"]}ms {escaped(fields["request_id"])}'
                f'{" " + fields["trace_id"] if "trace_id" in fields else ""}\n')

    def write(self, scope: Scope, status: int, started: float) -> None:
        """The line of a request whose response ended (also called by the fused layer,
        app/middleware/fused_layers.py)."""
        client = scope.get("client")
        state = scope.get("state", {})
        fields = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "client": client[0] if client else "-",
            "method": scope["method"],
            "path": scope["path"],
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "request_id": state.get("request_id", "-"),
        }
        if self.traced:  # 32 hex digits, from the tracing layer: no escaping
            fields["trace_id"] = state.get("trace_id", "-")
        self.stream.write(self.line(fields))
        self.stream.flush()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            if not is_response_end(message):
                await send(message)
                return
            try:  # the line also when the send is cancelled (a worker recycled)
                await send(message)
            finally:
                self.write(scope, status, started)

        await self.app(scope, receive, send_logged)


class JsonAccessLogMiddleware(AccessLogMiddleware):
    def line(self, fields: dict[str, object]) -> str:
        return json.dumps(fields, separators=(",", ":")) + "\n"


FORMATS: dict[str, type[AccessLogMiddleware]] = {
    "text": AccessLogMiddleware,
    "json": JsonAccessLogMiddleware,
}


def access_log_layer() -> tuple[type[AccessLogMiddleware], ...]:
    """The access log middleware WEBSERVER_ACCESS_LOG asks for, or none."""
    chosen = FORMATS.get(get_settings().access_log)
    return (chosen,) if chosen else ()
