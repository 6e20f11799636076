"""Hypercorn: its documented API (`hypercorn.config.Config`, `hypercorn.asyncio.serve`,
`hypercorn.trio.serve`) in each worker, under the launcher's own supervisor (workers.py).

- Loops: asyncio, uvloop and trio (the only engine that runs trio). On trio, the
  template's layers take their trio branches (docs/engines.md, "Hypercorn on trio");
  your code must use AnyIO, not asyncio.
- Why not its `run`: on SIGHUP it stops every worker before starting new ones, and a
  worker that fails stops the server; the supervisor starts each new worker first.
- Workers: forked from the launcher, each on a listener of its own (SO_REUSEPORT,
  handed to Hypercorn as `fd://`), which it drains before it stops (worker.py): the
  drain the other engines do, for one worker at a time.
- HTTP/3: with TLS on and WEBSERVER_HTTP3=true, QUIC on the same port over UDP, and
  Hypercorn's `alt-svc` header on every answer.
"""

from __future__ import annotations

import contextlib
import sys

from serving.engines.hypercorn.workers import WorkerSupervisor
from serving.settings import Settings

NAME = "hypercorn"
RELOADS_ITSELF = False  # its reloader needs workers and restarts them all: the launcher's


def run(settings: Settings, loop: str) -> None:
    supervisor = WorkerSupervisor(settings, loop)
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
    if supervisor.failed:
        sys.exit(supervisor.failed)
