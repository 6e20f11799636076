"""gunicorn: its native asgi worker under its arbiter, run through its documented
custom-application API (`gunicorn.app.base.BaseApplication`) and its server hooks.

- SIGTERM: the arbiter closes its listener and then stops its workers, and the last
  close resets the connections still queued. `when_ready` runs in the arbiter once its
  own signal handlers are set, and puts the drain in front of SIGTERM: the listener
  drops new SYNs, the workers accept what is queued, then the arbiter gets the signal
  (serving/drain.py).
- Respawning: the arbiter replaces every worker that exits. A worker that leaves of
  its own accord (recycled by max_requests, stopped) passes `worker_exit`, which tells
  the arbiter through a pipe; one that does not was killed (out of memory, kill -9,
  gunicorn's own timeout). With WEBSERVER_RESPAWN_FAILED_WORKERS=false `child_exit`
  then stops the server, which exits 1 for the orchestrator to restart.
- Backlog: the asgi worker hands the arbiter's listener to asyncio's `create_server`,
  which listens again with asyncio's default backlog of 100 (measured: `ss` showed 100
  for `backlog=1234`). `post_worker_init` has the worker listen once more, with
  WEBSERVER_BACKLOG, as soon as its servers exist.
- Head limits: `GunicornLimits`, a subclass of the worker's HTTP/1 protocol
  (serving/head_limits.py); gunicorn's own limits are per line.
- WebSockets: the asgi worker has no switch; serving/websockets_off.py refuses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.asgi.protocol import ASGIProtocol
from gunicorn.workers import gasgi
from starlette.types import ASGIApp

from app.core import logs, loops
from serving import drain
from serving.head_limits import head_limits
from serving.served_app import create_served_app
from serving.settings import Settings, get_settings
from serving.websockets_off import WebSocketsOff

NAME = "gunicorn"
# Its own reloader (27.0.1, asgi worker) answers every request with the error after a
# bad save, and never loads the fix: the launcher restarts it on each change instead.
RELOADS_ITSELF = False
WORKER_CLASS = f"{__name__}.GunicornWorker"  # gunicorn's `worker_class` takes a path
WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # gunicorn's default, kept for 0
PID_BYTES = 4
POLL = 0.01  # seconds
FAILED = 1  # the launcher's exit code when a killed worker stopped the server
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}
# What gunicorn 27's asgi worker handles on its loop, and the rest of what its arbiter
# handles (a fork inherits those handlers).
NOTED_SIGNALS = (*STOP_SIGNALS, signal.SIGUSR1, signal.SIGWINCH, signal.SIGABRT)
RESET_SIGNALS = (signal.SIGHUP, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTTIN,
                 signal.SIGTTOU)


def options(settings: Settings, loop: str) -> dict[str, object]:
    """gunicorn's settings for this run, by gunicorn's names."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return {
        "bind": [f"{host}:{settings.port}"],
        "worker_class": WORKER_CLASS,  # its native asgi worker, with the head limits
        "workers": settings.workers,
        "asgi_loop": loops.engine_value(NAME, loop),
        "http_parser": loops.http_engine_value(NAME, settings.resolved_http),
        "backlog": settings.backlog,
        "keepalive": settings.keepalive_timeout,
        "graceful_timeout": settings.graceful_timeout,
        "max_requests": settings.worker_max_requests,
        "max_requests_jitter": settings.worker_max_requests // 10,
        "loglevel": settings.log_level,
        "errorlog": "-",  # its lines on stderr, as the other engines' (docs/security.md)
        "logger_class": logs.gunicorn_logger(settings.log_format),  # app/core/logs.py
        "accesslog": None,  # the app's own access log, the same on every engine
        # The proxy headers are the app's layer's (create_served_app), as on the other
        # engines: gunicorn rewrites no scheme, and its trusted addresses only say who
        # may open cleartext HTTP/2 (gunicorn answers h2c to those alone).
        "secure_scheme_headers": {},
        "forwarded_allow_ips": settings.trusted_proxies,
        "websocket_max_message_size": settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE,
        "http_protocols": "h2,h1" if settings.http2 else "h1",
        "http2_cleartext": "both" if settings.http2 else "off",
        # Its control socket would go in $HOME/.gunicorn, which the image's user lacks
        # (and the root filesystem is read-only in Kubernetes).
        "control_socket_disable": True,
    }


def run(settings: Settings, loop: str) -> None:
    server = GunicornApp(options(settings, loop), settings.port,
                         drain.drain_timeout(settings.graceful_timeout),
                         settings.respawn_failed_workers)
    try:
        server.run()
    except SystemExit:
        if server.failed:
            sys.exit(FAILED)
        raise


class GunicornApp(BaseApplication):
    """gunicorn with these settings (gunicorn's names), serving the served app."""

    def __init__(self, options: dict[str, Any], port: int, drain_timeout: float,
                 respawn_failed: bool) -> None:
        self.options = options
        self.port = port
        self.backlog = int(options["backlog"])
        self.drain_timeout = drain_timeout
        self.respawn_failed = respawn_failed
        self.failed = False
        self.stopping = threading.Event()
        # Created before the workers fork: each inherits the writing end.
        self.exits, self.exit_writer = os.pipe()
        os.set_blocking(self.exits, False)
        self.left = set[int]()
        super().__init__()

    def load_config(self) -> None:
        hooks = {"when_ready": self.when_ready, "post_fork": self.post_fork,
                 "post_worker_init": self.post_worker_init,
                 "worker_exit": self.worker_exit, "child_exit": self.child_exit}
        for name, value in {**self.options, **hooks}.items():
            self.cfg.set(name, value)

    def load(self) -> ASGIApp:  # in each worker
        served = create_served_app()
        return served if get_settings().websockets else WebSocketsOff(served)

    def when_ready(self, arbiter: Any) -> None:
        """In the arbiter, after it set its signal handlers: drain before SIGTERM."""
        handle = drain.draining(signal.getsignal(signal.SIGTERM), self.port,
                                self.drain_timeout,
                                refuse=lambda: drain.refuse_own_listeners(self.port))

        def on_term(sig: int, frame: Any) -> None:
            self.stopping.set()
            handle(sig, frame)

        signal.signal(signal.SIGTERM, on_term)

    def post_fork(self, arbiter: Any, worker: Any) -> None:
        """In a new worker: hold the stop signals until it has its own handlers (see
        SignalsBeforeTheLoop): until then it has the arbiter's, whose queue nobody
        reads in a worker."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)

    def post_worker_init(self, worker: Any) -> None:
        """In a worker, before it serves: restore the backlog once its servers exist."""
        def listen_with_backlog() -> None:
            if not worker.servers:  # not yet created: look again on the next turn
                worker.loop.call_later(POLL, listen_with_backlog)
                return
            for sock in drain.own_listeners(self.port):
                sock.listen(self.backlog)
                sock.close()

        worker.loop.call_soon(listen_with_backlog)

    def worker_exit(self, arbiter: Any, worker: Any) -> None:
        """In a worker that leaves of its own accord."""
        with contextlib.suppress(OSError):
            os.write(self.exit_writer, os.getpid().to_bytes(PID_BYTES, "little"))

    def child_exit(self, arbiter: Any, worker: Any) -> None:
        """In the arbiter, after a worker exited: was it killed?"""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.exits, 4096):
                self.left.update(int.from_bytes(chunk[at:at + PID_BYTES], "little")
                                 for at in range(0, len(chunk), PID_BYTES))
        if worker.pid in self.left:
            self.left.discard(worker.pid)
            return
        if self.respawn_failed or self.stopping.is_set():
            return
        arbiter.log.error(f"Worker [{worker.pid}] was killed; not replaced "
                          "(WEBSERVER_RESPAWN_FAILED_WORKERS=false), stopping.")
        self.failed = True
        arbiter.num_workers -= 1  # no replacement (gunicorn's TTOU, past its floor of 1)
        os.kill(os.getpid(), signal.SIGTERM)


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
        # gunicorn 27.0.1 caches whether gunicorn-h1c is usable on the class it asks
        # from, then reads the cache on ASGIProtocol itself: asked from a subclass only,
        # it refuses http_parser="fast" on every connection (RuntimeError "gunicorn_h1c
        # >= 0.4.1 required"). Asked from ASGIProtocol first, the subclass inherits the
        # answer (only for that parser: the question imports gunicorn-h1c).
        if get_settings().resolved_http == "h1c":
            ASGIProtocol._check_h1c_protocol_available()
        # The worker builds each connection's protocol from this name (gunicorn
        # 27.0.1, `create_server(lambda: ASGIProtocol(self), ...)`), in this process.
        gasgi.ASGIProtocol = GunicornLimits
        super().init_process()


class GunicornLimits(ASGIProtocol):  # type: ignore[misc]
    """The asgi worker's HTTP/1 protocol with the head's size and time."""

    def __init__(self, worker: Any) -> None:
        super().__init__(worker)
        self.max_head, self.head_timeout = head_limits()
        self.head_timer: asyncio.TimerHandle | None = None
        self.head_bytes = 0
        self.in_body = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self.head_loop = asyncio.get_running_loop()  # the worker's
        self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)

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
            self.head_timer = self.head_loop.call_later(self.head_timeout, self.head_too_slow)
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
