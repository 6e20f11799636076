"""Server-Timing: the app's time from the request to the response start.

The whole request's duration, a pathsend-ended file response included, is in the
access log (WEBSERVER_ACCESS_LOG), which counts a pathsend as the end of a response.
"""

from __future__ import annotations

import time

from starlette.types import Scope

from app.middleware.start_headers import Headers, StartHeadersMiddleware

STARTED = "timing_started"


class TimingMiddleware(StartHeadersMiddleware):
    def response_headers(self, scope: Scope) -> Headers:
        scope.setdefault("state", {})[STARTED] = time.perf_counter()
        return []

    def headers_at_start(self, scope: Scope) -> Headers:
        elapsed_ms = (time.perf_counter() - scope["state"][STARTED]) * 1000
        return [(b"server-timing", b"app;dur=%.2f" % elapsed_ms)]
