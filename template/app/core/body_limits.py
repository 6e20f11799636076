"""A body limit of its own for some routes (BODY_LIMITS in app/custom.py).

WEBSERVER_MAX_BODY_SIZE and WEBSERVER_BODY_TIMEOUT hold for every route; an upload
route may need more without every other route accepting it too. A BodyLimit names a
path prefix, as your routes are declared (without WEBSERVER_ROOT_PATH or a forwarded
prefix), and the size and time a body sent there may take; the first that matches
wins. app/middleware/request_limits.py applies it before any route runs, so an
announced body over it is refused before a byte of it is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BODY_HEADERS = frozenset((b"content-length", b"transfer-encoding"))
MULTIPLEXED = frozenset(("2", "3"))  # http_version of HTTP/2 and /3: a body may be silent
CRLF = COLON_SPACE = 2


@dataclass(frozen=True)
class BodyLimit:
    path: str  # a prefix: "/uploads/" holds for /uploads/photo and everything below
    max_size: int  # bytes; 0 = none
    timeout: float  # seconds to send the whole body; 0 = none

    def matches(self, route_path: str) -> bool:
        return route_path.startswith(self.path)


def head_size(scope: dict[str, Any]) -> int:
    """The request line and headers as HTTP/1.1 sends them, but for the spaces around
    each value: the size WEBSERVER_MAX_HEADER_SIZE bounds, whatever the protocol."""
    query = scope.get("query_string")
    size = (len(scope["method"]) + 1 + len(scope.get("raw_path") or b"")
            + (1 + len(query) if query else 0) + len(" HTTP/1.1") + CRLF + CRLF)
    for name, value in scope["headers"]:  # a loop, not sum() over a generator: per request
        size += len(name) + COLON_SPACE + len(value) + CRLF
    return size
