"""The limits on a request head that granian applies, for uvicorn and gunicorn too.

uvicorn and gunicorn read a head (the request line and headers) with no time limit, and
uvicorn with no size limit either. Their protocols' subclasses, in each engine's package,
share what is here: past WEBSERVER_MAX_HEADER_SIZE, 431 and the connection closed, no
parser handed more; a head not whole WEBSERVER_HEADER_TIMEOUT seconds after the
connection or its first byte, closed without an answer, as granian does (the wait for a
kept-alive connection's first byte is WEBSERVER_KEEPALIVE_TIMEOUT's). HTTP/2 keeps each
engine's own limits (docs/security.md).
"""

from __future__ import annotations

from functools import lru_cache

from app.core.settings import get_settings

TOO_LARGE_BODY = b'{"detail":"Request Header Fields Too Large"}'
TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
             b"content-type: application/json\r\n"
             b"content-length: %d\r\nconnection: close\r\n\r\n" % len(TOO_LARGE_BODY)
             + TOO_LARGE_BODY)


@lru_cache
def head_limits() -> tuple[int, float]:
    """(bytes, seconds) for a head, read once per worker."""
    settings = get_settings()
    return settings.max_header_size, float(settings.header_timeout)


def head_too_large(error: BaseException | None) -> bool:
    """A parser's own refusal of a head as too large (h11's hint, zttp's message)."""
    return getattr(error, "error_status_hint", None) == 431 or (
        "exceeded configured size limit" in str(error))
