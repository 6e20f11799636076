"""granian: options and run through its Python API (`granian.Granian`), and its drain.

- Workers: granian forks (3.11-3.13) or spawns (3.14) them, and builds the loop in
  each; it replaces a failed one only with `respawn_failed_workers`.
- Drain: its workers each listen on a socket of their own (SO_REUSEPORT). On SIGTERM
  its main process asks them to drop new SYNs with SIGUSR2 (`refuse_in_workers`), reads
  their queues in /proc, then hands the signal to granian (serving/drain.py).
- Reload: its own reloader stops for good when a worker dies while starting (2.8.9),
  so the launcher restarts it on each change instead (serving/launcher.py).
- Head limits: its own (`http1_settings`), which the other engines copy.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from types import FrameType

from granian import Granian
from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings, HTTP2Settings
from granian.log import LogLevels
from starlette.types import ASGIApp

from app.core import logs, loops
from serving import drain
from serving.served_app import create_served_app
from serving.settings import Settings, get_settings

NAME = "granian"
RELOADS_ITSELF = False
# The app behind this module's factory: each worker then refuses new connections on
# its own listener when the main process asks.
APP_TARGET = f"{__name__}:served_app"
RSS_SAMPLE_SECONDS = 5
REFUSE_SIGNAL = signal.SIGUSR2
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def options(settings: Settings, loop: str) -> dict[str, object]:
    """granian's arguments for this run, by granian's names."""
    return dict(
        target=APP_TARGET,
        factory=True,
        address=settings.host,
        port=settings.port,
        # granian's default interface is RSGI; FastAPI speaks ASGI.
        interface=Interfaces.ASGI,
        workers=settings.workers,
        runtime_threads=settings.threads,
        loop=Loops(loops.engine_value(NAME, loop)),
        # granian's auto answers HTTP/2 too; pin HTTP/1 unless asked, like uvicorn.
        http=HTTPModes.auto if settings.http2 else HTTPModes.http1,
        websockets=settings.websockets,
        backlog=settings.backlog,
        backpressure=settings.max_concurrency or None,
        # Its header read timeout also closes an idle keep-alive connection (measured): one
        # timer for both, so the longer; its buffer is the most a request head may take.
        http1_settings=HTTP1Settings(
            header_read_timeout=max(settings.keepalive_timeout, settings.header_timeout) * 1000,
            max_buffer_size=settings.max_header_size),
        http2_settings=HTTP2Settings(max_headers_size=settings.max_header_size),
        log_level=LogLevels(settings.log_level),
        # Its lines and tracebacks on stderr, as uvicorn's and the app's: stdout is the
        # access log's alone (docs/security.md).
        # granian merges this dict into its default one, key by key: its handlers
        # replaced, by their names, with the same on stderr.
        log_dictconfig={"handlers": {"console": stderr_handler("generic"),
                                     "access": stderr_handler("access")},
                        **logs.engine_formatters(("generic", "access"), settings.log_format)},
        log_access=False,  # the app's own access log, the same on every engine
        respawn_failed_workers=settings.respawn_failed_workers,
        workers_lifetime=settings.worker_lifetime or None,
        workers_max_rss=settings.worker_max_memory or None,
        # granian samples RSS every 30 s by default; a leak is caught sooner this way.
        rss_sample_interval=RSS_SAMPLE_SECONDS,
        workers_kill_timeout=settings.graceful_timeout,
    )


def stderr_handler(formatter: str) -> dict[str, str]:
    return {"formatter": formatter, "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr"}


def run(settings: Settings, loop: str) -> None:
    server = Granian(**options(settings, loop))  # type: ignore[arg-type]

    @server.on_startup
    def drain_on_sigterm() -> None:
        # Runs in granian's main process once it has set its own signal handlers.
        signal.signal(signal.SIGTERM, drain.draining(
            signal.getsignal(signal.SIGTERM), settings.port,
            drain.drain_timeout(settings.graceful_timeout), refuse=refuse_in_workers))

    server.serve()


def served_app() -> ASGIApp:
    """In each worker: the served app, and its listener refused on REFUSE_SIGNAL."""
    # A forked worker inherits the main process's handlers, the drain's among them, until
    # granian sets its own once the app is built: a worker stopped while it imports the
    # app must stop, not drain the main process's listener and serve on.
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    refuse_on_signal(get_settings().port)
    return create_served_app()


def refuse_on_signal(port: int) -> None:
    """In a worker: drop new SYNs on its own listener when the main process asks."""
    def refuse(sig: int, frame: FrameType | None) -> None:
        # A signal handler runs inside whatever request code was executing: it must
        # never raise there, or that request fails.
        with contextlib.suppress(Exception):
            drain.refuse_own_listeners(port)

    signal.signal(REFUSE_SIGNAL, refuse)


def refuse_in_workers() -> None:
    """In the main process: ask each worker to refuse new connections."""
    for worker in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            os.kill(worker.pid, REFUSE_SIGNAL)
