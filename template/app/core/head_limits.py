"""The limits on a request head that granian applies, for uvicorn and gunicorn too.

A head is the request line and the headers. uvicorn and gunicorn read one with no time
limit once its first byte has arrived (or, on a new connection, before it), and
uvicorn with no limit on its size: httptools, its default parser, took a single 200 MB
header (a minute of CPU: the value is built by concatenation), and a client sending a
byte a second kept its connection for as long as it liked. granian's hyper answers 431
past its buffer (`http1_settings.max_buffer_size`) and closes a head that is not
complete within `http1_settings.header_read_timeout`.

Subclasses of the engines' own protocols do the same: uvicorn's, handed to its public
`http=` option (`server.uvicorn_config`), for each parser it offers; gunicorn's asgi
worker's, through a subclass of that worker (`worker_class`, `server.gunicorn_options`):

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

import asyncio
import sys
from functools import lru_cache
from typing import Any

from app.core.config import get_settings

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


# -- uvicorn --------------------------------------------------------------------------

class HeadLimits:
    """The head timer, and 431 for a head a parser found too large. Mixed into each of
    uvicorn's protocols, which share the names used here (`cycle`, `loop`,
    `transport`, `send_400_response`, `handle_websocket_upgrade`)."""

    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head, self.head_timeout = head_limits()
        self.head_timer: asyncio.TimerHandle | None = None
        self.upgraded = False  # to a WebSocket: the connection is no longer ours

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        self.head_timer = self.loop.call_later(self.head_timeout, self.head_too_slow)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        self.feed(data)
        if self.cycle is not cycle:  # a head was completed
            self.stop_head_timer()
        elif (self.head_timer is None and (cycle is None or cycle.response_complete)
              and not self.upgraded and not self.transport.is_closing()):
            # The first bytes of a head that is not complete yet: time it. (Bytes of
            # a body the app answered without reading count too; closing such a
            # connection once its answer is out is harmless.)
            self.head_timer = self.loop.call_later(self.head_timeout, self.head_too_slow)

    def feed(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]

    def head_too_slow(self) -> None:
        self.head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def refuse_head(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(TOO_LARGE)
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # Called by uvicorn inside its `except` for the parser's error.
        if head_too_large(sys.exception()):
            self.refuse_head()
        else:
            super().send_400_response(msg)  # type: ignore[misc]

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self.upgraded = True
        self.stop_head_timer()
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def stop_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None


class HeadGuard(HeadLimits):
    """For a parser that reads a head whole, however long (httptools; h11 when the head
    arrives in one read): it is handed at most `max_head` bytes of one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_bytes = 0  # of the head being read

    def reading_body(self) -> bool:
        raise NotImplementedError

    def feed(self, data: bytes) -> None:
        if self.upgraded or self.reading_body():
            super().feed(data)
            return
        cycle = self.cycle
        room = self.max_head - self.head_bytes
        part = data if len(data) <= room else data[:room]
        self.head_bytes += len(part)
        super().feed(part)
        if self.cycle is not cycle:  # a head ended in it
            self.head_bytes = 0
        if len(part) == len(data) or self.upgraded or self.transport.is_closing():
            return
        if self.head_bytes:  # `max_head` bytes, and the head goes on
            self.refuse_head()
            return
        self.feed(data[len(part):])


def httptools_limits() -> type:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsLimits(HeadGuard, HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.in_body = False  # between a head's end and its message's end

        def reading_body(self) -> bool:
            return self.in_body

        def on_headers_complete(self) -> None:
            self.in_body = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self.in_body = False
            super().on_message_complete()

    return HttpToolsLimits


def h11_limits() -> type:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class H11Limits(HeadGuard, H11Protocol):
        """h11 also stops at `h11_max_incomplete_event_size` (server.uvicorn_config),
        but only for a head still incomplete after a read."""

        def reading_body(self) -> bool:
            return self.conn.their_state is h11.SEND_BODY

    return H11Limits


def zttp_limits() -> type:
    from uvicorn.protocols.http.zttp_impl import ZttpProtocol

    class ZttpLimits(HeadLimits, ZttpProtocol):
        """zttp stops at 16 KiB and 100 headers itself (400, made 431 here)."""

    return ZttpLimits


UVICORN_PROTOCOLS = {"httptools": "HttpToolsLimits", "h11": "H11Limits",
                     "zttp": "ZttpLimits"}


def uvicorn_protocol(parser: str) -> str:
    """What uvicorn's `http=` takes for a resolved parser: this module's protocol."""
    return f"{__name__}:{UVICORN_PROTOCOLS[parser]}"


# -- gunicorn -------------------------------------------------------------------------

def gunicorn_limits() -> type:
    from gunicorn.asgi.protocol import ASGIProtocol

    # gunicorn 27.0.1 caches whether gunicorn-h1c is usable on the class it asks from,
    # then reads the cache on ASGIProtocol itself: asked from a subclass only, it
    # refuses http_parser="fast" on every connection (RuntimeError "gunicorn_h1c >=
    # 0.4.1 required"). Asked from ASGIProtocol first, the subclass inherits the answer
    # (only for that parser: the question imports gunicorn-h1c).
    if get_settings().resolved_http == "h1c":
        ASGIProtocol._check_h1c_protocol_available()

    class GunicornLimits(ASGIProtocol):  # type: ignore[misc]
        """gunicorn's HTTP/1 protocol (its asgi worker's) with the head's size and time.
        gunicorn's own limits are per line (`limit_request_line`, `..._field_size`)."""

        def __init__(self, worker: Any) -> None:
            super().__init__(worker)
            self.max_head, self.head_timeout = head_limits()
            self.head_timer: asyncio.TimerHandle | None = None
            self.head_bytes = 0
            self.in_body = False

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self.head_timer = self.worker.loop.call_later(self.head_timeout,
                                                          self.head_too_slow)

        def data_received(self, data: bytes) -> None:
            if (self.in_body or self._callback_parser is None or self._websocket
                    or self._h2c_buffer is not None):
                super().data_received(data)  # a body, WebSocket, or HTTP/2
                return
            room = self.max_head - self.head_bytes
            part = data if len(data) <= room else data[:room]
            self.head_bytes += len(part)
            super().data_received(part)  # _on_headers_complete resets the count
            if self._closed:
                return
            if self.head_bytes and not self.in_body and self.head_timer is None:
                # A head begun and not complete: time it.
                self.head_timer = self.worker.loop.call_later(self.head_timeout,
                                                              self.head_too_slow)
            if len(part) < len(data):
                if self.head_bytes and not self.in_body:  # `max_head` bytes, no end
                    self._send_error_response(431, "Request Header Fields Too Large")
                    self._close_transport()
                    return
                self.data_received(data[len(part):])

        def _on_headers_complete(self) -> Any:
            self.head_bytes = 0
            self.in_body = True
            self.stop_head_timer()
            return super()._on_headers_complete()

        def _on_message_complete(self) -> None:
            self.in_body = False
            super()._on_message_complete()

        def head_too_slow(self) -> None:
            self.head_timer = None
            if not self._closed:
                self._close_transport()

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_head_timer()
            super().connection_lost(exc)

        def stop_head_timer(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

    return GunicornLimits


def gunicorn_worker() -> type:
    from gunicorn.workers import gasgi

    from app.core.gunicorn_app import SignalsBeforeTheLoop

    class GunicornWorker(SignalsBeforeTheLoop, gasgi.ASGIWorker):  # type: ignore[misc]
        """gunicorn's asgi worker, its connections served by GunicornLimits."""

        def init_process(self) -> None:
            # The worker builds each connection's protocol from this name (gunicorn
            # 27.0.1, `create_server(lambda: ASGIProtocol(self), ...)`), in this process.
            gasgi.ASGIProtocol = __getattr__("GunicornLimits")
            super().init_process()

    return GunicornWorker


GUNICORN_WORKER = f"{__name__}.GunicornWorker"  # gunicorn's `worker_class` takes a path

# Built when an engine imports one by name: a worker loads only its own parser's module
# (tests/test_boot.py looks at what it loaded).
BUILDERS = {"HttpToolsLimits": httptools_limits, "H11Limits": h11_limits,
            "ZttpLimits": zttp_limits, "GunicornLimits": gunicorn_limits,
            "GunicornWorker": gunicorn_worker}


def __getattr__(name: str) -> type:
    if name not in BUILDERS:
        raise AttributeError(name)
    built = BUILDERS[name]()
    built.__module__, built.__qualname__ = __name__, name
    globals()[name] = built
    return built
