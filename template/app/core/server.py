"""The launcher: start the chosen engine on an explicit loop through its Python API."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp

from app.core import loops
from app.core.config import ENV_PREFIX, PROJECT_SLUG, Settings, get_settings

APP_TARGET = "app.main:create_app"
# granian has no proxy-headers option: its workers build the app through this factory.
GRANIAN_APP_TARGET = "app.core.server:create_granian_app"
UVICORN_WS_PING_TIMEOUT = 20.0
APP_DIR = Path(__file__).resolve().parents[1]


def startup_line(settings: Settings, loop: str) -> str:
    workers = f"{settings.workers} worker{'s' if settings.workers != 1 else ''}"
    reload = ", reload" if settings.reload else ""
    http2 = ", HTTP/2" if settings.http2 else ""
    python = platform.python_version()
    return (
        f"Starting {PROJECT_SLUG} web server ({settings.engine} on {loop}, "
        f"{settings.resolved_http} parser{http2}, Python {python}, {workers}{reload}) "
        f"on http://{settings.host}:{settings.port}"
    )


def publish(settings: Settings, loop: str) -> None:
    # Workers and reloader children rebuild Settings from the environment, so they
    # must see this run's choices, command-line flags and the resolved `auto` included.
    os.environ[f"{ENV_PREFIX}ENGINE"] = settings.engine
    os.environ[f"{ENV_PREFIX}LOOP"] = loop
    os.environ[f"{ENV_PREFIX}HTTP"] = settings.http
    os.environ[f"{ENV_PREFIX}HTTP2"] = str(settings.http2).lower()
    os.environ[f"{ENV_PREFIX}TRUSTED_PROXIES"] = settings.trusted_proxies


def create_granian_app() -> ASGIApp:
    """The app wrapped in granian's own proxy-headers middleware, as uvicorn applies its own."""
    from granian.utils.proxies import wrap_asgi_with_proxy_headers

    from app.main import create_app

    trusted = get_settings().trusted_proxies
    return wrap_asgi_with_proxy_headers(create_app(), trusted_hosts=trusted)


def run_uvicorn(settings: Settings, loop: str) -> None:
    import uvicorn

    uvicorn.run(
        APP_TARGET,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        reload=settings.reload,
        reload_dirs=[str(APP_DIR)] if settings.reload else None,
        loop=loops.engine_value("uvicorn", loop),
        http=settings.http,
        http2=settings.http2,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=settings.graceful_timeout,
        proxy_headers=True,
        forwarded_allow_ips=settings.trusted_proxies,
        ws_ping_interval=settings.ws_ping_interval or None,
        ws_ping_timeout=UVICORN_WS_PING_TIMEOUT if settings.ws_ping_interval else None,
    )


def run_granian(settings: Settings, loop: str) -> None:
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.log import LogLevels

    Granian(
        GRANIAN_APP_TARGET,
        factory=True,
        address=settings.host,
        port=settings.port,
        # granian's default interface is RSGI; FastAPI speaks ASGI.
        interface=Interfaces.ASGI,
        workers=settings.workers,
        loop=Loops(loops.engine_value("granian", loop)),
        # granian's auto answers HTTP/2 too; pin HTTP/1 unless asked, like uvicorn.
        http=HTTPModes.auto if settings.http2 else HTTPModes.http1,
        log_level=LogLevels(settings.log_level),
        log_access=False,
        workers_kill_timeout=settings.graceful_timeout,
    ).serve()


def run_granian_dev(settings: Settings, loop: str) -> None:
    """Restart a non-reloading granian on every change, as uvicorn's reloader does.

    granian's own reloader (2.8.9) stops for good when a worker dies while starting (a
    syntax error saved into a running dev server), and with
    `reload_ignore_worker_failure` it can miss SIGTERM when a change lands while a
    worker is spawning. watchfiles restarts the server on each change and, when it
    crashed, waits for the next save.
    """
    import watchfiles

    serving = settings.model_copy(update={"reload": False})
    # watchfiles turns SIGTERM into KeyboardInterrupt once it has stopped the child.
    with contextlib.suppress(KeyboardInterrupt):
        watchfiles.run_process(APP_DIR, target=run_granian, args=(serving, loop))


ENGINE_RUNNERS: dict[str, Callable[[Settings, str], None]] = {
    "uvicorn": run_uvicorn,
    "granian": run_granian,
}


DEV_RUNNERS: dict[str, Callable[[Settings, str], None]] = {
    "uvicorn": run_uvicorn,  # uvicorn's reloader already survives a bad save
    "granian": run_granian_dev,
}


def serve(settings: Settings) -> None:
    loop = settings.resolved_loop
    publish(settings, loop)
    print(startup_line(settings, loop), file=sys.stderr, flush=True)
    runners = DEV_RUNNERS if settings.reload else ENGINE_RUNNERS
    runners[settings.engine](settings, loop)
