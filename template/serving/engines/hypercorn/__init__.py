"""Hypercorn: its documented API (`hypercorn.config.Config`, `hypercorn.asyncio.serve`,
`hypercorn.trio.serve`) in each worker, under the launcher's own supervisor (workers.py).

Not its `run`: on SIGHUP that stops every worker before starting new ones, and a worker
that fails stops the server. Workers are forked, each on a listener of its own
(SO_REUSEPORT, handed over as `fd://`) that it drains before it stops. The only engine
that runs trio: the template's layers take their trio branches there, and your code must
use AnyIO (docs/engines.md). HTTP/3: QUIC on the same port, with TLS and WEBSERVER_HTTP3.
"""

from __future__ import annotations

import contextlib
import sys

from app.core.settings import Settings
from serving.engines.hypercorn.workers import WorkerSupervisor

NAME = "hypercorn"
RELOADS_ITSELF = False  # its reloader needs workers and restarts them all: the launcher's


def run(settings: Settings, loop: str) -> None:
    supervisor = WorkerSupervisor(settings, loop)
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
    if supervisor.failed:
        sys.exit(supervisor.failed)
