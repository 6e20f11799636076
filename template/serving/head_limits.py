"""The limits on a request head that granian applies, for uvicorn and gunicorn too.

A head is the request line and the headers. uvicorn and gunicorn read one with no time
limit once its first byte has arrived (or, on a new connection, before it), and
uvicorn with no limit on its size: httptools, its default parser, took a single 200 MB
header (a minute of CPU: the value is built by concatenation), and a client sending a
byte a second kept its connection for as long as it liked. granian's hyper answers 431
past its buffer (`http1_settings.max_buffer_size`) and closes a head that is not
complete within `http1_settings.header_read_timeout`.

Subclasses of the engines' own protocols do the same, each in its engine's module:
uvicorn's, handed to its public `http=` option, for each parser it offers
(serving/engines/uvicorn/protocols.py); gunicorn's asgi worker's, through a subclass of that
worker (`worker_class`, serving/engines/gunicorn/worker.py). This module holds what they share:

- WEBSERVER_MAX_HEADER_SIZE: a head longer than this is answered 431 and the
  connection closed. A parser that reads a head whole however long it is (httptools;
  h11 when the head comes in one read; gunicorn's) is never handed more than that many
  bytes of one. zttp stops at its own 16 KiB and 100 headers, and its 400 becomes 431.
  More than 100 header lines get 431 from the app (app/middleware/request_limits.py)
  or from the engine (granian, zttp, gunicorn), once the size has bounded them.
- WEBSERVER_HEADER_TIMEOUT: a new connection that has not sent a whole head within
  this many seconds, or a head not complete that long after its first byte, is closed
  without an answer, as granian closes it. The wait for that first byte on a
  kept-alive connection is WEBSERVER_KEEPALIVE_TIMEOUT, as before.

HTTP/2 (`--http2`) is left to each engine's own limits.
"""

from __future__ import annotations

from functools import lru_cache

from serving.settings import get_settings

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
