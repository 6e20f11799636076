"""Conservative security headers on every HTTP response that has not set its own, and
Strict-Transport-Security while the server itself serves TLS (WEBSERVER_HSTS): a
browser then never tries plain HTTP on this host for a year."""

from __future__ import annotations

from app.core.asgi import ASGIApp
from app.core.settings import get_settings
from app.middleware.start_headers import Headers, StartHeadersMiddleware

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
HSTS = (b"strict-transport-security", b"max-age=31536000")


class SecurityHeadersMiddleware(StartHeadersMiddleware):
    static_headers = SECURITY_HEADERS

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        settings = get_settings()
        if settings.hsts and settings.tls_certfile:
            self.static_headers: Headers = [*SECURITY_HEADERS, HSTS]
