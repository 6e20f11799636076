"""uvicorn's worker supervisor, with respawning a choice and recycling always on.

uvicorn's own supervisor replaces every worker that dies. Here a worker that exits 0
has been recycled (`limit_max_requests`) and is always replaced; a worker that dies
otherwise is replaced only with WEBSERVER_RESPAWN_FAILED_WORKERS=true, and else the
whole server stops with exit code 1, for the orchestrator to restart, as granian does.
"""

from __future__ import annotations

import logging

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

logger = logging.getLogger("uvicorn.error")
RECYCLED = 0


class WorkerSupervisor(Multiprocess):
    respawn_failed = False
    failed = False  # a worker died and was not replaced: the run is a failure

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
