"""Server-Timing: the app's time from the request to the response start.

The header-only layer measures it (start_headers.py), once per request however many
header middleware it runs. The whole request's duration, a pathsend-ended file
response included, is in the access log (WEBSERVER_ACCESS_LOG).
"""

from __future__ import annotations

from app.middleware.start_headers import StartHeadersMiddleware


class TimingMiddleware(StartHeadersMiddleware):
    server_timing = True
