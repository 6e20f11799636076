"""gunicorn: its asgi worker under its arbiter, through its documented custom-application
API (`gunicorn.app.base.BaseApplication`) and server hooks.

- SIGTERM: the arbiter's close would reset the queued connections, so `when_ready` puts
  the drain in front of its handler (serving/drain.py).
- Respawning: `worker_exit` tells the arbiter a worker left of its own accord; with
  WEBSERVER_RESPAWN_FAILED_WORKERS=false, `child_exit` stops the server on any other.
- Backlog: asyncio listens again with its own default; `post_worker_init` re-listens with
  WEBSERVER_BACKLOG. Head limits: `GunicornLimits` (serving/head_limits.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from gunicorn.app.base import BaseApplication

from app.core import loops, tls
from app.core.asgi import ASGIApp
from app.core.settings import Settings, get_settings
from app.core.stopping import server_stopping
from serving import drain, reload
from serving.engines.gunicorn import logger
from serving.engines.gunicorn.worker import PID_BYTES, POLL, STOP_SIGNALS, GunicornLimits
from serving.served_app import create_served_app, forget_your_modules
from serving.websockets_off import WebSocketsOff

NAME = "gunicorn"
# Its own reloader (asgi worker) answers every request with the error after a bad
# save, and never loads the fix: the launcher restarts it on each change instead.
RELOADS_ITSELF = False
WORKER_CLASS = "serving.engines.gunicorn.worker.GunicornWorker"  # `worker_class` takes a path
WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # gunicorn's default, kept for 0
FAILED = 1  # the launcher's exit code when a killed worker stopped the server


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
        "logger_class": logger.logger_class(settings.log_format),
        "accesslog": None,  # the app's own access log, the same on every engine
        # Proxy headers are the app's layer's (app/middleware/forwarded.py): here the
        # trusted addresses only say who may open cleartext HTTP/2.
        "secure_scheme_headers": {},
        "forwarded_allow_ips": settings.trusted_proxies,
        "websocket_max_message_size": settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE,
        "http_protocols": "h2,h1" if settings.http2 else "h1",  # ALPN's, with TLS
        # TLS, checked by the settings (app/core/tls.py).
        "certfile": settings.tls_certfile or None,
        "keyfile": settings.tls_keyfile or None,
        "ciphers": tls.CIPHERS,
        "http2_cleartext": "both" if settings.http2 else "off",
        # Its HTTP/2 per-field limit resets the stream: this large, the app's layer answers
        # 431 instead, as elsewhere. HTTP/1 heads are bounded whole by worker.py.
        "http2_max_header_list_size": HEADER_LIST_BOUND,
        "limit_request_field_size": HEADER_LIST_BOUND,
        # Its control socket would go in $HOME/.gunicorn, which the image's user lacks
        # (and the root filesystem is read-only in Kubernetes).
        "control_socket_disable": True,
    }


HEADER_LIST_BOUND = 65_536  # gunicorn's own bound on an HTTP/2 header list


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
        self.readies, self.ready_writer = os.pipe()  # a new worker's pid, once it serves
        self.births, self.birth_writer = os.pipe()  # a new worker's pid, once forked
        # Non-blocking: a reader takes what is there; a writer, the pipe full (it is read
        # only during a reload), drops a pid rather than hold a worker.
        for end in (self.readies, self.ready_writer, self.births, self.birth_writer):
            os.set_blocking(end, False)
        self.killed = set[int]()  # new workers stopped before they served, not replaced
        self.reloading = threading.Lock()
        super().__init__()

    def load_config(self) -> None:
        hooks = {"when_ready": self.when_ready, "post_fork": self.post_fork,
                 "post_worker_init": self.post_worker_init,
                 "worker_exit": self.worker_exit, "child_exit": self.child_exit}
        for name, value in {**self.options, **hooks}.items():
            self.cfg.set(name, value)

    def load(self) -> ASGIApp:  # in each worker
        forget_your_modules()  # your app/custom.py read from disk, not the arbiter's copy
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
        signal.signal(signal.SIGHUP, lambda sig, frame: threading.Thread(
            target=self.reload_in_turn, args=(arbiter,), name="reload", daemon=True).start())

    def reload_in_turn(self, arbiter: Any) -> None:
        """One reload at a time: a second SIGHUP runs its reload after the first (two at
        once crossed their TTIN and TTOU, and left 1, 3 or 4 workers)."""
        with self.reloading:
            self.reload(arbiter)

    def reload(self, arbiter: Any) -> None:
        """In the arbiter, on SIGHUP: each worker replaced in turn, once the new one
        serves. gunicorn's own reload stops the old workers before the new serve, and
        stops the server when a new one fails to start."""
        if not reload.accepted("gunicorn", arbiter.log.log):
            return
        pids_in(self.readies)  # what earlier workers said
        workers = arbiter.num_workers
        for _ in range(workers):
            if self.stopping.is_set():
                arbiter.log.info(reload.STOPPED)
                return
            pids_in(self.births)
            os.kill(os.getpid(), signal.SIGTTIN)  # one more worker, with the code on disk
            if not self.new_worker_serves(reload.READY_TIMEOUT):
                new = pids_in(self.births)
                arbiter.log.log(*reload.not_ready(",".join(map(str, new)) or "?",
                                                  stopping=self.stopping.is_set()))
                if self.stopping.is_set():
                    self.kill_unready(new)
                else:
                    os.kill(os.getpid(), signal.SIGTTOU)
                return
            os.kill(os.getpid(), signal.SIGTTOU)  # gunicorn stops its oldest worker
        arbiter.log.info(reload.DONE.format(workers=workers))

    def kill_unready(self, new: set[int]) -> None:
        """On a stop: the new workers that do not serve yet have accepted nothing, and the
        arbiter's stop would wait for their start."""
        unready = new - pids_in(self.readies)
        self.killed.update(unready)
        for pid in unready:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def new_worker_serves(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0 and not self.stopping.is_set():
            if select.select([self.readies], [], [], min(left, 0.5))[0]:
                return len(os.read(self.readies, PID_BYTES)) == PID_BYTES
        return False

    def post_fork(self, arbiter: Any, worker: Any) -> None:
        """In a new worker: hold the stop signals until it has its own handlers (see
        SignalsBeforeTheLoop): until then it has the arbiter's, whose queue nobody
        reads in a worker."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        with contextlib.suppress(OSError):
            os.write(self.birth_writer, os.getpid().to_bytes(PID_BYTES, "little"))

    def post_worker_init(self, worker: Any) -> None:
        """In a worker, before it serves: restore the backlog once its servers exist."""
        def listen_with_backlog() -> None:
            if not worker.servers:  # not yet created: look again on the next turn
                worker.loop.call_later(POLL, listen_with_backlog)
                return
            for sock in drain.own_listeners(self.port):
                sock.listen(self.backlog)
                sock.close()
            with contextlib.suppress(OSError):  # serving: a reload may stop an old one
                os.write(self.ready_writer, os.getpid().to_bytes(PID_BYTES, "little"))

        async def stop_when_not_alive() -> None:
            # Every way the worker stops (a signal, max_requests) clears `alive`.
            while worker.alive:
                await asyncio.sleep(POLL * 5)
            server_stopping.set()
            await asyncio.sleep(drain.STOP_IDLE)
            for connection in list(GunicornLimits.open):
                connection.close_if_silent()

        worker.loop.call_soon(listen_with_backlog)
        worker.loop.create_task(stop_when_not_alive())

    def worker_exit(self, arbiter: Any, worker: Any) -> None:
        """In a worker that leaves of its own accord."""
        with contextlib.suppress(OSError):
            os.write(self.exit_writer, os.getpid().to_bytes(PID_BYTES, "little"))

    def child_exit(self, arbiter: Any, worker: Any) -> None:
        """In the arbiter, after a worker exited: was it killed?"""
        self.left.update(pids_in(self.exits))
        if worker.pid in self.left:
            self.left.discard(worker.pid)
            return
        if worker.pid in self.killed:  # the arbiter would start another while it drains
            arbiter.num_workers -= 1
            return
        if self.respawn_failed or self.stopping.is_set():
            return
        arbiter.log.error(f"Worker [{worker.pid}] was killed; not replaced "
                          "(WEBSERVER_RESPAWN_FAILED_WORKERS=false), stopping.")
        self.failed = True
        arbiter.num_workers -= 1  # no replacement (gunicorn's TTOU, past its floor of 1)
        os.kill(os.getpid(), signal.SIGTERM)


def pids_in(pipe: int) -> set[int]:
    """The pids written to a non-blocking pipe so far, each PID_BYTES long."""
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(pipe, 4096):
            data += chunk
    return {int.from_bytes(data[at:at + PID_BYTES], "little")
            for at in range(0, len(data), PID_BYTES)}
