"""gunicorn's native asgi worker under its arbiter, run through gunicorn's documented
custom-application API (`gunicorn.app.base.BaseApplication`) and its server hooks.

- SIGTERM: the arbiter closes its listener and then stops its workers, and the last
  close resets the connections still queued. `when_ready` runs in the arbiter once its
  own signal handlers are set, and puts the launcher's drain in front of SIGTERM: the
  listener drops new SYNs, the workers accept what is queued, then the arbiter gets
  the signal (app/core/drain.py).
- Respawning: the arbiter replaces every worker that exits. A worker that leaves of
  its own accord (recycled by max_requests, stopped) passes `worker_exit`, which tells
  the arbiter through a pipe; one that does not was killed (out of memory, kill -9,
  gunicorn's own timeout). With WEBSERVER_RESPAWN_FAILED_WORKERS=false `child_exit`
  then stops the server, which exits 1 for the orchestrator to restart, as under
  uvicorn and granian; otherwise the arbiter replaces it.
- Backlog: the asgi worker hands the arbiter's listener to asyncio's `create_server`,
  which listens again with asyncio's default backlog of 100 (measured: `ss` showed 100
  for `backlog=1234`). `post_worker_init` has the worker listen once more, with
  WEBSERVER_BACKLOG, as soon as its servers exist.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from gunicorn.app.base import BaseApplication
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core import drain

PID_BYTES = 4
POLL = 0.01  # seconds
FAILED = 1  # the launcher's exit code when a killed worker stopped the server
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}
# What gunicorn 27's asgi worker handles on its loop, and the rest of what its arbiter
# handles (a fork inherits those handlers).
NOTED_SIGNALS = (*STOP_SIGNALS, signal.SIGUSR1, signal.SIGWINCH, signal.SIGABRT)
RESET_SIGNALS = (signal.SIGHUP, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTTIN,
                 signal.SIGTTOU)


class GunicornApp(BaseApplication):
    """gunicorn with these settings (gunicorn's names), serving the launcher's app."""

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
        from app.core.server import create_served_app

        return create_served_app()

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
    """For gunicorn's asgi worker: signals that arrive while it imports the app are
    handled once its loop runs, not lost.

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


class WebSocketsOff:
    """WEBSERVER_WEBSOCKETS=false under gunicorn, whose asgi worker has no switch: a
    WebSocket upgrade is refused (closed before it is accepted: gunicorn answers 403)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})
            return
        await self.app(scope, receive, send)
