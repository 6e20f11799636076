"""The launcher's supervisor of Hypercorn workers (worker.py), on the other engines' rules.

A worker recycled (WEBSERVER_WORKER_MAX_REQUESTS) gets its successor first; one that
failed is replaced only with WEBSERVER_RESPAWN_FAILED_WORKERS=true, else the server exits
1, as when one fails before it ever served. SIGTERM stops them together, each draining
its own listener; SIGHUP builds the code on disk once (serving/reload.py), then replaces
each. Workers are forked from the launcher, so they skip importing Hypercorn and the
settings again (docs/deploy.md), and import the app themselves, so new ones serve the
code on disk. A fork copies no thread: the launcher holds none.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from app.core import logs
from app.core.settings import Settings, get_settings
from serving import reload
from serving.engines.hypercorn.worker import READY, RECYCLE, serve
from serving.served_app import forget_your_modules

FAILED = 1
STOP_MARGIN = 5.0  # seconds past the grace period before a stopping worker is killed
TICK = 0.5
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
HANDLED = (*STOP_SIGNALS, signal.SIGHUP, signal.SIGTTIN)  # the supervisor's handlers


@dataclass
class Worker:
    process: BaseProcess
    messages: Connection  # READY, then RECYCLE


class WorkerSupervisor:
    failed = 0  # the exit code, when the server stopped because a worker failed
    unready_pid = 0  # the last worker that did not come to serve

    def __init__(self, settings: Settings, loop: str) -> None:
        self.settings, self.loop = settings, loop
        self.context = multiprocessing.get_context("fork")
        self.workers: list[Worker] = []
        self.signals: list[int] = []
        self.wakeup_in, self.wakeup_out = socket.socketpair()

    def log(self, level: int, line: str) -> None:
        logs.announce(line, self.settings.log_format, level=level)

    def run(self) -> None:
        for number in HANDLED:
            signal.signal(number, self.take_signal)
        self.wakeup_out.setblocking(False)
        self.wakeup_in.setblocking(False)
        signal.set_wakeup_fd(self.wakeup_out.fileno())
        self.workers = self.started(self.settings.workers)
        if len(self.workers) < self.settings.workers:
            if not self.stop_asked():  # a startup failure: its traceback is above
                self.failed = FAILED
            return self.stop()
        self.supervise()

    def take_signal(self, number: int, _frame: object) -> None:
        self.signals.append(number)

    def stop_asked(self) -> bool:
        with contextlib.suppress(BlockingIOError):
            self.wakeup_in.recv(512)
        return any(number in STOP_SIGNALS for number in self.signals)

    def supervise(self) -> None:
        while True:
            ready = wait([self.wakeup_in, *(w.process.sentinel for w in self.workers),
                          *(w.messages for w in self.workers)], TICK)
            self.stop_asked()
            while self.signals:
                number = self.signals.pop(0)
                if number in STOP_SIGNALS:
                    return self.stop()
                if number == signal.SIGHUP:
                    self.reload()
                elif number == signal.SIGTTIN:
                    self.workers += self.started()
            for index, worker in enumerate(self.workers):
                if worker.messages in ready and asked_to_recycle(worker):
                    if not self.replace(index, "recycled"):
                        return self.stop()
                elif worker.process.exitcode is not None and not self.respawn(index):
                    return self.stop()

    def respawn(self, index: int) -> bool:
        worker = self.workers[index]
        code = worker.process.exitcode
        if not self.settings.respawn_failed_workers:
            self.log(logging.ERROR, f"Worker [{worker.process.pid}] died with exit code "
                     f"{code}; not replaced (WEBSERVER_RESPAWN_FAILED_WORKERS=false), "
                     "stopping.")
            self.failed = FAILED
            return False
        return self.replace(index, f"died with exit code {code}")

    def replace(self, index: int, reason: str) -> bool:
        """The worker at `index` replaced: its successor serving first."""
        old = self.workers[index]
        self.log(logging.INFO, f"Worker [{old.process.pid}] {reason}; starting a new one.")
        new = self.started()
        if not new:
            self.failed = 0 if self.stop_asked() else FAILED
            return False
        self.workers[index] = new[0]
        stopped([old], self.settings.graceful_timeout + STOP_MARGIN)
        return True

    def started(self, count: int = 1) -> list[Worker]:
        """`count` new workers, started together, once all serve; none when one failed,
        did not serve within READY_TIMEOUT, or a stop was asked meanwhile."""
        starting = []
        for _ in range(count):
            reader, writer = self.context.Pipe(duplex=False)
            # Its signals held across the fork: one that came before the worker drops the
            # supervisor's handlers would be queued in the worker's copy, and lost.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
            process = self.context.Process(target=self.forked, name="hypercorn worker",
                                           args=(writer, mask))
            try:
                process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            writer.close()
            starting.append(Worker(process, reader))
        deadline = time.monotonic() + reload.READY_TIMEOUT
        if all(self.serving(worker, deadline) for worker in starting):
            return starting
        for worker in starting:
            self.unready_pid = worker.process.pid or 0
        stopped(starting, 0.0)
        return []

    def forked(self, writer: Connection, mask: set[signal.Signals]) -> None:
        """The worker, in the forked process: as a spawned one would begin."""
        # The supervisor's handlers, wakeup socket and other workers' pipes are the
        # launcher's: the worker starts on the defaults, and its loop sets its own.
        signal.set_wakeup_fd(-1)
        for number in signal.valid_signals():
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.default_int_handler
                              if number == signal.SIGINT else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a SIGTERM held till now stops it
        self.wakeup_in.close()
        self.wakeup_out.close()
        for worker in self.workers:
            worker.messages.close()
        forget_your_modules()  # your app/custom.py read from disk, as a spawned worker does
        get_settings.cache_clear()  # built from this run's environment, as when spawned
        serve(self.loop, writer)

    def serving(self, worker: Worker, deadline: float) -> bool:
        while (left := deadline - time.monotonic()) > 0 and not self.stop_asked():
            if worker.messages in wait([worker.messages, worker.process.sentinel,
                                        self.wakeup_in], left):
                try:
                    return worker.messages.recv_bytes() == READY
                except EOFError:  # it exited before it served
                    return False
            if worker.process.exitcode is not None:
                return False
        return False

    def reload(self) -> None:
        if not reload.accepted("hypercorn", self.log):
            return
        for index, old in enumerate(list(self.workers)):
            new = self.started()
            if not new:
                self.log(*reload.not_ready(self.unready_pid, stopping=self.stop_asked()))
                return
            self.workers[index] = new[0]
            stopped([old], self.settings.graceful_timeout + STOP_MARGIN)
        self.log(logging.INFO, reload.DONE.format(workers=len(self.workers)))

    def stop(self) -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        stopped(self.workers, self.settings.graceful_timeout + STOP_MARGIN)


def asked_to_recycle(worker: Worker) -> bool:
    try:
        return worker.messages.recv_bytes() == RECYCLE
    except EOFError:  # it exited: its exit code tells the rest
        return False


def stopped(workers: list[Worker], timeout: float) -> None:
    """Each worker sent SIGTERM (it drains itself), then given `timeout` to exit."""
    for worker in workers:
        if worker.process.exitcode is None:
            worker.process.terminate()
    deadline = time.monotonic() + timeout
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        worker.messages.close()
