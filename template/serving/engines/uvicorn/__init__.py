"""uvicorn: options (`config`) and run: its reloader in dev, else its supervisor
(workers.py). Its workers serve through this package's protocols (protocols.py), with
the head limits (serving/head_limits.py), one per parser, handed to its public `http=`
option."""

from __future__ import annotations

import contextlib
import sys

import uvicorn
from uvicorn.supervisors import ChangeReload

from app.core import logs, loops, tls
from app.core.settings import Settings
from serving import drain
from serving.engines import APP_DIR
from serving.engines.uvicorn.protocols import protocol
from serving.engines.uvicorn.workers import WorkerSupervisor
from serving.served_app import APP_TARGET

NAME = "uvicorn"
RELOADS_ITSELF = True  # its reloader already survives a bad save
WS_PING_TIMEOUT = 20.0
WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # uvicorn's default, kept for 0

def config(settings: Settings, loop: str) -> uvicorn.Config:
    return uvicorn.Config(
        APP_TARGET,
        factory=True,
        host=settings.host, port=settings.port,
        workers=settings.workers,
        reload=settings.reload,
        reload_dirs=[str(APP_DIR)] if settings.reload else None,
        loop=loops.engine_value(NAME, loop),
        # The parser's protocol with the head limits granian applies (below); HTTP/2
        # keeps zttp's own, which uvicorn requires by name.
        http="zttp" if settings.http2 else protocol(settings.resolved_http),
        http2=settings.http2,
        h11_max_incomplete_event_size=settings.max_header_size,
        ws="auto" if settings.websockets else "none",
        log_level=settings.log_level,
        # Its own default (text), or its loggers with the app's format (app/core/logs.py).
        **({"log_config": logs.uvicorn_json_config()} if settings.log_format == "json" else {}),
        access_log=False,  # the app's own access log, the same on every engine
        backlog=settings.backlog,
        limit_concurrency=settings.max_concurrency or None,
        limit_max_requests=settings.worker_max_requests or None,
        limit_max_requests_jitter=settings.worker_max_requests // 10,
        timeout_keep_alive=settings.keepalive_timeout,
        timeout_graceful_shutdown=settings.graceful_timeout,
        proxy_headers=False,  # the app's own layer (app/middleware/forwarded.py)
        ws_max_size=settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE,
        ws_ping_interval=settings.ws_ping_interval or None,
        ws_ping_timeout=WS_PING_TIMEOUT if settings.ws_ping_interval else None,
        # TLS, checked by the settings (app/core/tls.py); ALPN offers h2 with zttp's HTTP/2.
        ssl_certfile=settings.tls_certfile or None,
        ssl_keyfile=settings.tls_keyfile or None,
        ssl_ciphers=tls.CIPHERS,
    )


def run(settings: Settings, loop: str) -> None:
    served = config(settings, loop)
    sockets = [served.bind_socket()]
    if settings.reload:  # the reloader pickles the server for its child: plain
        with contextlib.suppress(KeyboardInterrupt):
            ChangeReload(served, target=uvicorn.Server(served).run, sockets=sockets).run()
        return
    # Always a supervisor, one worker included: it replaces a recycled worker, and the
    # workers on SIGHUP (a lone uvicorn process stops on it).
    supervisor = WorkerSupervisor(served, sockets=sockets)
    supervisor.respawn_failed = settings.respawn_failed_workers
    supervisor.drain_timeout = drain.drain_timeout(settings.graceful_timeout)
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
    if supervisor.failed:
        sys.exit(supervisor.failed)
