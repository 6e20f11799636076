"""The launcher's supervisor of Hypercorn workers (worker.py), the same rules as the
other engines':

- it holds the listeners (TCP, and UDP for HTTP/3) and spawns each worker on them;
- a worker recycled by WEBSERVER_WORKER_MAX_REQUESTS (exit 0) is replaced; one that
  failed only with WEBSERVER_RESPAWN_FAILED_WORKERS=true, else the server stops (exit
  1); one that fails before it ever served stops the server (a startup failure);
- SIGTERM (or SIGINT): the queued connections accepted first (serving/drain.py), then
  every worker stopped, each within the grace period;
- SIGHUP: the code on disk built once (serving/reload.py), then each worker replaced
  by a new one that serves first.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import socket
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from app.core import logs
from serving import drain, reload
from serving.engines.hypercorn.worker import READY, serve
from serving.settings import Settings

RECYCLED = 0
FAILED = 1
STOP_MARGIN = 5.0  # seconds past the grace period before a stopping worker is killed
TICK = 0.5


class WorkerSupervisor:
    failed = 0  # the exit code, when the server stopped because a worker failed
    drain_timeout = 0.0

    def __init__(self, settings: Settings, loop: str) -> None:
        self.settings, self.loop = settings, loop
        self.context = multiprocessing.get_context("spawn")
        self.sockets = listeners(settings)
        self.workers: list[BaseProcess] = []
        self.signals: list[int] = []
        self.wakeup_in, self.wakeup_out = socket.socketpair()

    def log(self, level: int, line: str) -> None:
        logs.announce(line, self.settings.log_format, level=level)

    def run(self) -> None:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTTIN):
            signal.signal(number, self.take_signal)
        self.wakeup_out.setblocking(False)
        self.wakeup_in.setblocking(False)
        signal.set_wakeup_fd(self.wakeup_out.fileno())
        try:
            for _ in range(self.settings.workers):
                worker = self.started()
                if worker is None:  # a startup failure: its traceback is above
                    self.failed = FAILED
                    return self.stop()
                self.workers.append(worker)
            self.supervise()
        finally:
            for sock in self.sockets:
                sock.close()

    def take_signal(self, number: int, _frame: object) -> None:
        self.signals.append(number)

    def supervise(self) -> None:
        while True:
            wait([self.wakeup_in, *(worker.sentinel for worker in self.workers)], TICK)
            with contextlib.suppress(BlockingIOError):
                self.wakeup_in.recv(512)
            while self.signals:
                number = self.signals.pop(0)
                if number in (signal.SIGTERM, signal.SIGINT):
                    return self.stop()
                if number == signal.SIGHUP:
                    self.reload()
                elif number == signal.SIGTTIN:
                    worker = self.started()
                    if worker is not None:
                        self.workers.append(worker)
            for index, worker in enumerate(self.workers):
                if worker.exitcode is None:
                    continue
                code = worker.exitcode
                if code != RECYCLED and not self.settings.respawn_failed_workers:
                    self.log(logging.ERROR, f"Worker [{worker.pid}] died with exit code "
                             f"{code}; not replaced (WEBSERVER_RESPAWN_FAILED_WORKERS="
                             "false), stopping.")
                    self.failed = FAILED
                    return self.stop()
                reason = "recycled" if code == RECYCLED else f"died with exit code {code}"
                self.log(logging.INFO, f"Worker [{worker.pid}] {reason}; starting a new one.")
                new = self.started()
                if new is None:
                    self.failed = FAILED
                    return self.stop()
                self.workers[index] = new

    def started(self, timeout: float = reload.READY_TIMEOUT) -> BaseProcess | None:
        """A new worker, once it serves; None when it failed or did not in time."""
        reader, writer = self.context.Pipe(duplex=False)
        worker = self.context.Process(target=serve, name="hypercorn worker",
                                      args=(self.loop, self.sockets, writer))
        worker.start()
        writer.close()
        if serving(worker, reader, timeout):
            reader.close()
            return worker
        reader.close()
        if worker.exitcode is None:
            worker.kill()
        worker.join()
        return None

    def reload(self) -> None:
        if not reload.accepted("hypercorn", self.log):
            return
        for index, old in enumerate(self.workers):
            new = self.started()
            if new is None:
                self.log(logging.ERROR, reload.NOT_READY.format(
                    pid="?", seconds=reload.READY_TIMEOUT))
                return
            self.workers[index] = new
            stopped([old], self.settings.graceful_timeout + STOP_MARGIN)
        self.log(logging.INFO, reload.DONE.format(workers=len(self.workers)))

    def stop(self) -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:  # the workers go on accepting from the listener while it drains
            drain.refuse_new_connections([s for s in self.sockets if s.type == socket.SOCK_STREAM])
            drain.wait_until_accepted(self.settings.port, self.drain_timeout)
        except OSError:
            pass
        stopped(self.workers, self.settings.graceful_timeout + STOP_MARGIN)


def serving(worker: BaseProcess, reader: Connection, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if reader in wait([reader, worker.sentinel], left):
            try:
                return reader.recv_bytes() == READY
            except EOFError:  # it exited before it served
                return False
        if worker.exitcode is not None:
            return False
    return False


def stopped(workers: list[BaseProcess], timeout: float) -> None:
    for worker in workers:
        if worker.exitcode is None:
            worker.terminate()
    deadline = time.monotonic() + timeout
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.exitcode is None:
            worker.kill()
            worker.join()


def listeners(settings: Settings) -> list[socket.socket]:
    """The TCP listener (and, for HTTP/3, the UDP socket on the same port)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    tcp = socket.socket(family, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted ones inherit it
    tcp.bind((settings.host, settings.port))
    tcp.listen(settings.backlog)
    tcp.set_inheritable(True)
    sockets = [tcp]
    if settings.http3:
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((settings.host, settings.port))
        sockets.append(udp)
    return sockets
