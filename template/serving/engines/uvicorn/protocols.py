"""uvicorn's HTTP/1 protocols, one per parser, with the head limits granian applies
(serving/head_limits.py) and a stop that loses no request; uvicorn takes one by name
(`http=`, protocol() below)."""

from __future__ import annotations

import asyncio
import sys
from socket import AF_INET, AF_INET6, IPPROTO_TCP, TCP_NODELAY
from typing import Any

from serving import drain
from serving.head_limits import TOO_LARGE, head_limits, head_too_large


class HeadLimits:
    """The head timer, 431 for a head too large, and a stop that loses no request, on
    uvicorn's protocols' names."""

    cycle: Any
    stopping = False  # the worker is stopping: each answer from now closes its connection
    fed_since_stop = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head, self.head_timeout = head_limits()
        self.head_timer: asyncio.TimerHandle | None = None
        self.upgraded = False  # to a WebSocket: the connection is no longer ours

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # Nagle off: asyncio does it only on sockets made with proto IPPROTO_TCP, not on
        # uvicorn's bind_socket() (proto 0): each kept-alive answer waited for a delayed ACK.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (AF_INET, AF_INET6):
            sock.setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[misc]
        # Its own handles on the connection, not the protocols' `transport` and `loop`.
        self.head_transport, self.head_loop = transport, asyncio.get_running_loop()
        self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        self.feed(data)
        if self.stopping:
            self.fed_since_stop = True
        if self.cycle is not cycle:  # a head was completed
            self.stop_head_timer()
            if self.stopping and self.cycle is not None:
                self.cycle.keep_alive = False  # its answer says Connection: close
        elif (self.head_timer is None and (cycle is None or cycle.response_complete)
              and not self.upgraded and not self.head_transport.is_closing()):
            # A head begun, not complete: time it (a body left unread counts: harmless).
            self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

    def feed(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]

    def head_too_slow(self) -> None:
        self.head_timer = None
        if not self.head_transport.is_closing():
            self.head_transport.close()

    def refuse_head(self) -> None:
        if not self.head_transport.is_closing():
            self.head_transport.write(TOO_LARGE)
            self.head_transport.close()

    def send_400_response(self, msg: str) -> None:
        # Called by uvicorn inside its `except` for the parser's error.
        if head_too_large(sys.exception()):
            self.refuse_head()
        else:
            super().send_400_response(msg)  # type: ignore[misc]

    def shutdown(self) -> None:
        # uvicorn closes a connection between requests at once. A kept-alive one may have
        # its next request on the way, which would be lost: it gets STOP_IDLE seconds to
        # arrive and is answered with Connection: close. A new connection that has sent
        # nothing yet keeps its head timer (WEBSERVER_HEADER_TIMEOUT): its client may be
        # about to write (measured: closing such connections lost ~1 request a recycle).
        self.stopping = True
        if self.cycle is None:
            return
        if self.cycle.response_complete:
            self.head_loop.call_later(drain.STOP_IDLE, self.close_if_silent)
        else:
            super().shutdown()  # type: ignore[misc]

    def close_if_silent(self) -> None:
        if (not self.fed_since_stop and not self.head_transport.is_closing()
                and not drain.bytes_waiting(self.head_transport)):
            super().shutdown()  # type: ignore[misc]

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
    """Hands a parser that reads a head whole (httptools; h11 in one read) `max_head`."""

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
        if len(part) == len(data) or self.upgraded or self.head_transport.is_closing():
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
        """h11's own `h11_max_incomplete_event_size` misses a head read at once."""

        def reading_body(self) -> bool:
            return self.conn.their_state is h11.SEND_BODY

    return H11Limits


def zttp_limits() -> type:
    from uvicorn.protocols.http.zttp_impl import ZttpProtocol

    class ZttpLimits(HeadLimits, ZttpProtocol):
        """zttp stops at 16 KiB and 100 headers itself (400, made 431 here)."""

    return ZttpLimits


# Built when uvicorn imports one by name (`http=`): a worker loads only its own
# parser's module (tests/test_boot.py looks at what it loaded).
PROTOCOLS = {"httptools": "HttpToolsLimits", "h11": "H11Limits", "zttp": "ZttpLimits"}
BUILDERS = dict(HttpToolsLimits=httptools_limits, H11Limits=h11_limits, ZttpLimits=zttp_limits)


def protocol(parser: str) -> str:
    """What uvicorn's `http=` takes for a resolved parser: this module's protocol."""
    return f"{__name__}:{PROTOCOLS[parser]}"


def __getattr__(name: str) -> type:
    if name not in BUILDERS:
        raise AttributeError(name)
    built = BUILDERS[name]()
    built.__module__, built.__qualname__ = __name__, name
    globals()[name] = built
    return built
