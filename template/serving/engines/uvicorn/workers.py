"""uvicorn's workers: its supervisor (`Multiprocess`), with the choices made.

`WorkerSupervisor` replaces a worker recycled by `limit_max_requests` (exit 0), and a
failed one only with WEBSERVER_RESPAWN_FAILED_WORKERS=true, else stops the server (exit
1). On SIGTERM it drains the listener before uvicorn closes it (serving/drain.py); on
SIGHUP it replaces each worker once the new one serves (serving/reload.py). Workers are
forked from the launcher where uvicorn would spawn them, so they skip importing uvicorn
and the settings again (docs/deploy.md), and import the app themselves, so new ones
serve the code on disk. A fork copies no thread: the launcher holds none."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import sys
import threading
from socket import socket

import uvicorn
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from app.core.stopping import server_stopping
from serving import drain, reload
from serving.served_app import forget_your_modules

RECYCLED = 0  # a worker's exit code after `limit_max_requests`
INTERRUPTED = 128 + signal.SIGINT  # a worker's exit code after Ctrl-C, as a shell's
STARTUP_FAILURE = 3  # uvicorn's exit code when it fails to start (docs/private-names.md)
FORK = multiprocessing.get_context("fork")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
logger = logging.getLogger("uvicorn.error")


class WorkerServer(uvicorn.Server):
    async def shutdown(self, sockets: list[socket] | None = None) -> None:
        # Every way a worker stops (a signal, limit_max_requests) comes here first.
        server_stopping.set()
        await super().shutdown(sockets=sockets)


class WorkerProcess(Process):
    """A worker whose server sets `server_stopping` (app/core/stopping.py), forked."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket]) -> None:
        super().__init__(config, sockets)
        # uvicorn's handle, made but not started, replaced by a fork's.
        self.process = FORK.Process(target=self.forked, kwargs={"sockets": sockets})

    def forked(self, sockets: list[socket]) -> None:
        """The worker, in the forked process: as a spawned one would begin."""
        # The supervisor's handlers are the launcher's: the worker starts on the
        # defaults, and uvicorn's server sets its own for SIGINT and SIGTERM.
        for number in signal.valid_signals():
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.default_int_handler
                              if number == signal.SIGINT else signal.SIG_DFL)
        forget_your_modules()  # your app/custom.py read from disk, as a spawned worker does
        # Ctrl-C reaches every worker: asyncio's runner then raises KeyboardInterrupt (a
        # traceback each); exit as interrupted, since 0 would read as recycled.
        try:
            self.target(sockets=sockets)  # uvicorn's worker: its health-check thread, its server
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED)

    @property
    def server(self) -> uvicorn.Server:
        if getattr(self, "worker_server", None) is None:
            self.worker_server = WorkerServer(config=self.config)
        return self.worker_server


class WorkerSupervisor(Multiprocess):
    respawn_failed = False
    failed = 0  # the exit code, when a worker died and was not replaced
    drain_timeout = 0.0

    def __init__(self, config: uvicorn.Config, sockets: list[socket]) -> None:
        super().__init__(config, sockets)
        # uvicorn queues every signal for its loop, which a reload keeps busy: a stop
        # must also reach the reload's wait for a new worker.
        self.stop_asked = threading.Event()
        for number in STOP_SIGNALS:
            signal.signal(number, self.take_stop_signal)

    def take_stop_signal(self, number: int, _frame: object) -> None:
        self.signal_queue.append(number)
        self.stop_asked.set()

    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            self.processes.append(self.started())

    def started(self) -> WorkerProcess:
        process = WorkerProcess(self.config, self.sockets)
        process.start()
        return process

    def handle_term(self) -> None:
        # The workers go on accepting from the shared listener while it drains; a drain
        # that fails must not keep the stop from happening.
        with contextlib.suppress(OSError):
            drain.refuse_new_connections(self.sockets)
            drain.wait_until_accepted(self.config.port, self.drain_timeout)
        super().handle_term()

    def handle_hup(self) -> None:
        """Each worker replaced in turn, once its replacement serves (serving/reload.py)."""
        if not reload.accepted("uvicorn", logger.log):
            return
        for index, old in enumerate(self.processes):
            if self.stop_asked.is_set():
                logger.info(reload.STOPPED)
                return
            new = self.started()
            if not new.wait_until_ready(reload.READY_TIMEOUT, self.stop_asked):
                if self.stop_asked.is_set() and new.is_ready(timeout=1):
                    new.terminate()  # it may have accepted since the last check
                else:
                    new.kill()  # not serving: nothing of it to drain
                new.join()
                logger.log(*reload.not_ready(new.pid, stopping=self.stop_asked.is_set()))
                return
            old.terminate()
            old.join()
            self.processes[index] = new
        logger.info(reload.DONE.format(workers=len(self.processes)))

    def handle_ttin(self) -> None:
        self.processes_num += 1
        self.processes.append(self.started())

    def keep_subprocess_alive(self) -> None:
        # uvicorn's own loop (Multiprocess.keep_subprocess_alive), with the choice made.
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # hung, or already gone
            process.join()
            if self.should_exit.is_set():
                return
            code = process.exitcode
            if code == STARTUP_FAILURE or (code != RECYCLED and not self.respawn_failed):
                if code != STARTUP_FAILURE:
                    logger.error(f"Worker [{process.pid}] died with exit code {code}; not "
                                 "replaced (WEBSERVER_RESPAWN_FAILED_WORKERS=false), stopping.")
                self.failed = STARTUP_FAILURE if code == STARTUP_FAILURE else 1
                self.should_exit.set()
                return
            reason = "recycled" if code == RECYCLED else f"died with exit code {code}"
            logger.info(f"Worker [{process.pid}] {reason}; starting a new one.")
            self.processes[index] = self.started()
