"""Conservative security headers on every HTTP response that has not set its own."""

from __future__ import annotations

from app.middleware.start_headers import StartHeadersMiddleware

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeadersMiddleware(StartHeadersMiddleware):
    static_headers = SECURITY_HEADERS
