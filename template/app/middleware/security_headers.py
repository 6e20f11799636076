"""Conservative security headers on every HTTP response that has not set its own."""

from __future__ import annotations

from starlette.types import Scope

from app.middleware.start_headers import Headers, StartHeadersMiddleware

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeadersMiddleware(StartHeadersMiddleware):
    def response_headers(self, scope: Scope) -> Headers:
        return SECURITY_HEADERS
