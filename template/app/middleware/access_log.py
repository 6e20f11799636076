"""One access log line per request, the same on both engines (theirs are off).

Fields: time (UTC), client (after proxy headers), method, path, status, duration in
ms, request id. WEBSERVER_ACCESS_LOG picks the shape: `text`, or `json` (one object
per line). The line is written when the response ends, a pathsend included.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import get_settings
from app.middleware.messages import Message, is_response_end


class AccessLogMiddleware:
    """The text line: `TIME CLIENT "METHOD PATH" STATUS DURATIONms REQUEST_ID`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stream = sys.stdout

    def line(self, fields: dict[str, object]) -> str:
        return ('{time} {client} "{method} {path}" {status} {duration_ms}ms {request_id}\n'
                .format(**fields))

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
            await send(message)
            if is_response_end(message):
                client = scope.get("client")
                self.stream.write(self.line({
                    "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                    "client": client[0] if client else "-",
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    "request_id": scope.get("state", {}).get("request_id", "-"),
                }))
                self.stream.flush()

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
