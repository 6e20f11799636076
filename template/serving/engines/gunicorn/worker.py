"""gunicorn's asgi worker as the launcher runs it: its signals held until its loop
runs, its connections served by GunicornLimits (the head limits, serving/head_limits.py,
and a stop that closes the connections between requests)."""

from __future__ import annotations

import asyncio
import os
import signal
import weakref
from typing import Any, ClassVar

from gunicorn.asgi.protocol import ASGIProtocol
from gunicorn.workers import gasgi

from app.core.settings import get_settings
from app.core.stopping import server_stopping
from serving import drain
from serving.head_limits import head_limits

PID_BYTES = 4
POLL = 0.01  # seconds
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}
# What gunicorn 27's asgi worker handles on its loop, and the rest of what its arbiter
# handles (a fork inherits those handlers).
NOTED_SIGNALS = (*STOP_SIGNALS, signal.SIGUSR1, signal.SIGWINCH, signal.SIGABRT)
RESET_SIGNALS = (signal.SIGHUP, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTTIN,
                 signal.SIGTTOU)


class SignalsBeforeTheLoop:
    """Signals that arrive while the worker imports the app are handled once its loop
    runs, not lost.

    The worker adds its handlers to its event loop before it imports the app, and
    uvloop drops a signal that arrives before the loop runs (measured: the handler
    never fires; asyncio keeps it). A worker stopped while it started (a recycle, a
    respawn) then served on until the arbiter killed it after the graceful timeout.
    Here, plain handlers note what arrives until the loop's first turn, when the
    worker's own handlers are set and what was noted is sent again. The stop signals
    held since `post_fork` are let in once the notes are taken, before the app (and
    any thread or process it starts, which would inherit the mask) is imported."""

    def init_signals(self) -> None:
        arrived: list[int] = []
        for number in RESET_SIGNALS:  # the arbiter's handlers, inherited by the fork
            signal.signal(number, signal.SIG_DFL)
        for number in NOTED_SIGNALS:
            signal.signal(number, lambda received, frame: arrived.append(received))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        worker_init_signals = super().init_signals  # type: ignore[misc]

        def on_the_loop() -> None:
            worker_init_signals()
            for number in arrived:
                os.kill(os.getpid(), number)

        self.loop.call_soon(on_the_loop)  # type: ignore[attr-defined]


class GunicornWorker(SignalsBeforeTheLoop, gasgi.ASGIWorker):  # type: ignore[misc]
    """gunicorn's asgi worker, its connections served by GunicornLimits."""

    def init_process(self) -> None:
        # gunicorn caches whether gunicorn-h1c is usable on the class it asks
        # from, then reads the cache on ASGIProtocol itself: asked from a subclass only,
        # it refuses http_parser="fast" on every connection (a RuntimeError that a
        # newer gunicorn_h1c is required). Asked from ASGIProtocol first, the subclass inherits the
        # answer (only for that parser: the question imports gunicorn-h1c).
        if get_settings().resolved_http == "h1c":
            ASGIProtocol._check_h1c_protocol_available()
        # The worker builds each connection's protocol from this name
        # (`create_server(lambda: ASGIProtocol(self), ...)`), in this process.
        gasgi.ASGIProtocol = GunicornLimits
        super().init_process()


class GunicornLimits(ASGIProtocol):  # type: ignore[misc]
    """The asgi worker's HTTP/1 protocol with the head's size and time, and a stop that
    closes the connections between requests (gunicorn waits for them until their
    keep-alive runs out)."""

    open: ClassVar[weakref.WeakSet[GunicornLimits]] = weakref.WeakSet()

    def __init__(self, worker: Any) -> None:
        super().__init__(worker)
        self.open.add(self)
        self.fed = 0  # bytes received, and as many when it last began to wait idle
        self.fed_when_idle = -1
        self.max_head, self.head_timeout = head_limits()
        self.h2c_upgrade = get_settings().h2c_upgrade
        self.head_timer: asyncio.TimerHandle | None = None
        self.head_bytes = 0
        self.in_body = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self.head_loop = asyncio.get_running_loop()  # the worker's
        self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

    def close_if_silent(self) -> None:
        """At a stop, STOP_IDLE seconds in: closed if it is kept alive and no byte came
        since its last answer. One on its way is answered, with Connection: close. A new
        connection that has sent nothing yet keeps its WEBSERVER_HEADER_TIMEOUT: its
        client may be about to write (measured: closed at 0.25 s, requests were lost)."""
        if self._closed or drain.bytes_waiting(self.transport):
            return
        if self._keepalive_handle is not None and self.fed == self.fed_when_idle:
            self._keepalive_timeout()  # gunicorn's close of an idle connection

    def _arm_keepalive_timer(self) -> None:
        # Called once an answer is done and the connection waits for the next request.
        self.fed_when_idle = self.fed
        super()._arm_keepalive_timer()

    def data_received(self, data: bytes) -> None:
        self.fed += len(data)
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
            self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)
        if len(part) < len(data):
            if self.head_bytes and not self.in_body:  # `max_head` bytes, no end
                self._send_error_response(431, "Request Header Fields Too Large")
                self._close_transport()
                return
            self.data_received(data[len(part):])

    def _on_headers_complete(self) -> Any:
        # The worker's last request before its recycle (max_requests): the stop begins
        # now, so its answer says Connection: close (app/middleware/open_streams.py) and its
        # client does not send the next request into a connection about to close.
        self.worker.heads = getattr(self.worker, "heads", 0) + 1
        if self.worker.heads >= self.worker.max_requests:
            server_stopping.set()
        self.head_bytes = 0
        self.in_body = True
        self.stop_head_timer()
        if not self.h2c_upgrade:  # served as HTTP/1.1, the Upgrade ignored
            self._h2c_upgrade_ok = False
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
