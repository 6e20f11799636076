"""Server-Timing for the time to the response start; the full time logged at the end.

The end of a response is a final body chunk or a pathsend: a middleware that waits
for the final body alone never sees file responses finish under granian.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from app.middleware.messages import Message, add_headers, is_response_end

logger = logging.getLogger("app.timing")


class TimingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def send_timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                elapsed_ms = (time.perf_counter() - started) * 1000
                add_headers(message, [(b"server-timing", f"app;dur={elapsed_ms:.2f}".encode())])
            await send(message)
            if is_response_end(message):
                total_ms = (time.perf_counter() - started) * 1000
                logger.debug("%s %s done in %.2f ms", scope["method"], scope["path"], total_ms)

        await self.app(scope, receive, send_timed)
