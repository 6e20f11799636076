"""What Hypercorn has no option for, in front of the served app in each worker."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from serving.head_limits import TOO_LARGE_BODY

CRLF, COLON_SPACE = 2, 2


class HTTP2Off:
    """WEBSERVER_HTTP2=false: Hypercorn answers cleartext HTTP/2 (h2c) whatever it is
    told, so an HTTP/2 request gets 505 here instead of being served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("http_version") == "2":
            await send({"type": "http.response.start", "status": 505,
                        "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


class HeadSizeLimit:
    """WEBSERVER_MAX_HEADER_SIZE for a head that arrived whole: h11's
    `h11_max_incomplete_size` only bounds one still arriving, so a longer head read at
    once reaches the app; it gets 431 and the connection closes, as on the others."""

    def __init__(self, app: ASGIApp, max_header_size: int) -> None:
        self.app, self.max_size = app, max_header_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_size(scope) > self.max_size:
            await send({"type": "http.response.start", "status": 431,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(TOO_LARGE_BODY)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": TOO_LARGE_BODY})
            return
        await self.app(scope, receive, send)


def head_size(scope: Scope) -> int:
    """The request line and headers as sent, but for the spaces around each value."""
    query = scope["query_string"]
    line = (len(scope["method"]) + 1 + len(scope["raw_path"] or b"")
            + (1 + len(query) if query else 0) + len(" HTTP/1.1") + CRLF)
    return line + sum(len(name) + COLON_SPACE + len(value) + CRLF
                      for name, value in scope["headers"]) + CRLF
