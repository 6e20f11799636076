"""Hypercorn: its documented API (`hypercorn.config.Config`, `hypercorn.asyncio.serve`,
`hypercorn.trio.serve`) in each worker, under the launcher's own supervisor
(workers.py).

- Why not its `run`: on SIGHUP it stops every worker before starting new ones, and a
  worker that fails stops the server; the supervisor starts each new worker first.
- Workers: spawned, each on a listener of its own (SO_REUSEPORT, handed to Hypercorn
  as `fd://`), which it drains before it stops (worker.py): the drain the other
  engines do, for one worker at a time.
- HTTP/3: with TLS on and WEBSERVER_HTTP3=true, QUIC on the same port over UDP, and
  Hypercorn's `alt-svc` header on every answer.
- trio: Hypercorn's trio worker; FastAPI runs on it through AnyIO.
"""

from __future__ import annotations

import contextlib
import sys

from hypercorn.config import Config

from app.core import logs
from serving.engines.hypercorn.workers import WorkerSupervisor
from serving.settings import Settings

NAME = "hypercorn"
RELOADS_ITSELF = False  # its reloader needs workers and restarts them all: the launcher's
WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # Hypercorn's default, kept for 0


def config(settings: Settings) -> Config:
    """Hypercorn's configuration for one worker, by Hypercorn's names; the listeners
    are the supervisor's (`fd://`), set by the worker."""
    served = Config()
    served.backlog = settings.backlog
    # Its idle timer runs from the connection's start (or last answer) until a head is
    # complete, so it is the head timeout too (measured): one timer, the larger.
    served.keep_alive_timeout = max(settings.keepalive_timeout, settings.header_timeout)
    served.graceful_timeout = settings.graceful_timeout
    served.h11_max_incomplete_size = settings.max_header_size
    served.h2_max_header_list_size = settings.max_header_size
    served.websocket_max_message_size = settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE
    served.websocket_ping_interval = settings.ws_ping_interval or None
    served.alpn_protocols = ["h2", "http/1.1"] if settings.http2 else ["http/1.1"]
    served.accesslog = None  # the app's own access log, the same on every engine
    served.errorlog = logs.hypercorn_error_log(settings.log_format, settings.log_level)
    served.loglevel = settings.log_level.upper()
    if settings.tls_certfile:  # checked by the settings (serving/tls.py)
        served.certfile, served.keyfile = settings.tls_certfile, settings.tls_keyfile
    return served


def run(settings: Settings, loop: str) -> None:
    supervisor = WorkerSupervisor(settings, loop)
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
    if supervisor.failed:
        sys.exit(supervisor.failed)
