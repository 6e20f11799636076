"""uvicorn's server and worker supervisor, draining the listen queue on SIGTERM, with
respawning a choice and recycling always on.

Both take the connections already queued before they let uvicorn close the listener
(app/core/drain.py), which would reset them.

uvicorn's own supervisor replaces every worker that dies. Here a worker that exits 0
has been recycled (`limit_max_requests`) and is always replaced; a worker that dies
otherwise is replaced only with WEBSERVER_RESPAWN_FAILED_WORKERS=true, and else the
whole server stops with exit code 1, for the orchestrator to restart, as granian does.
"""

from __future__ import annotations

import logging
from socket import socket

from uvicorn import Config, Server
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from app.core import drain

logger = logging.getLogger("uvicorn.error")
RECYCLED = 0


class DrainingServer(Server):
    """One uvicorn process serving `sockets` (bound by the launcher)."""

    def __init__(self, config: Config, sockets: list[socket], drain_timeout: float) -> None:
        super().__init__(config)
        self.handle_exit = drain.draining(  # type: ignore[method-assign]
            super().handle_exit, config.port, drain_timeout,
            refuse=lambda: drain.refuse_new_connections(sockets))


class WorkerSupervisor(Multiprocess):
    respawn_failed = False
    failed = False  # a worker died and was not replaced: the run is a failure
    drain_timeout = 0.0

    def handle_term(self) -> None:
        # The workers go on accepting from the shared listener while it drains.
        drain.refuse_new_connections(self.sockets)
        drain.wait_until_accepted(self.config.port, self.drain_timeout)
        super().handle_term()

    def keep_subprocess_alive(self) -> None:
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
                logger.error(f"Worker [{process.pid}] died with exit code {code}; "
                             "not replaced (WEBSERVER_RESPAWN_FAILED_WORKERS=false), stopping.")
                self.failed = True
                self.should_exit.set()
                return
            reason = "recycled" if code == RECYCLED else f"died with exit code {code}"
            logger.info(f"Worker [{process.pid}] {reason}; starting a new one.")
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[index] = replacement
