"""The launcher: check where the server will listen, export the run's settings to the
environment its workers inherit, and start the chosen engine's module
(serving/engines/) on an explicit loop."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import platform
import socket
from collections.abc import Callable

from app.core import logs
from app.core.setting_specs import BY_NAME
from app.core.settings import PROJECT_SLUG, SETTINGS, Settings
from serving import engines, memory, metrics_listener
from serving.engines import APP_DIR


def startup_line(settings: Settings, loop: str) -> str:
    workers = f"{settings.workers} worker{'s' if settings.workers != 1 else ''}"
    reload = ", reload" if settings.reload else ""
    http2 = ", HTTP/2" if settings.http2 else ""
    docs = ", API docs" if settings.api_docs else ""
    python = platform.python_version()
    return (
        f"Starting {PROJECT_SLUG} web server ({settings.engine} on {loop}, "
        f"{settings.resolved_http} parser{http2}, Python {python}, {workers}{reload}{docs}) "
        f"on {settings.scheme}://{settings.host}:{settings.port}"
    )


def export_to_environment(settings: Settings, loop: str) -> None:
    # Workers and reloader children rebuild Settings from the environment, so they
    # must see this run's choices, command-line flags and the resolved `auto` included.
    for spec in SETTINGS:
        os.environ[spec.env] = spec.text(getattr(settings, spec.name))
    os.environ[BY_NAME["loop"].env] = loop


class ListenError(Exception):
    """The engine could not listen where it was asked, as one sentence."""


METRICS_PORT_FROM = "--metrics-port, WEBSERVER_METRICS_PORT"


def listen_address(host: str, port: int, where: str = "--port, WEBSERVER_PORT") -> str:
    """The numeric address to hand the engine, after a trial bind of host:port.

    Each engine reports these failures its own way (granian: a traceback and a Rust
    backtrace, and no host names at all); the trial turns each into one sentence, the
    same on every engine, and a name such as `localhost` into the address all accept.
    """
    with bound_socket(host, port, where) as trial:
        return str(trial.getsockname()[0])


def bound_socket(host: str, port: int, where: str) -> socket.socket:
    """A socket bound to host:port as the engines bind, or ListenError's one sentence."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError):
        raise ListenError(
            f"the host {host!r} cannot be resolved: give an address such as 127.0.0.1 or "
            "0.0.0.0, or a name this machine resolves (--host, WEBSERVER_HOST)."
        ) from None
    bound = socket.socket(family, kind, proto)
    # As the engines bind: a port left in TIME_WAIT is free, a listening one is not;
    # "::" takes IPv4 too, where the system's default says so.
    bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        bound.bind(address)
    except OSError as error:
        bound.close()
        raise ListenError(_bind_failure(host, port, error, where)) from None
    return bound


def _bind_failure(host: str, port: int, error: OSError, where: str) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use by another process: stop that "
            f"process or choose another port ({where})."
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return (
            f"the host {host!r} is not an address of this machine, so nothing can listen "
            "on it: use 127.0.0.1, 0.0.0.0 or one of this machine's addresses "
            "(--host, WEBSERVER_HOST)."
        )
    if error.errno == errno.EACCES:
        return (
            f"port {port} is a privileged port and this process (uid {os.getuid()}) may "
            f"not listen on it: use a port of 1024 or above ({where}) and map the public "
            "port to it in the proxy or container."
        )
    return f"cannot listen on {host}:{port}: {error.strerror or error} ({where})."


def restart_on_change(runner: Callable[[Settings, str], None]) -> Callable[[Settings, str], None]:
    """Restart a non-reloading server on every change, as uvicorn's reloader does.

    granian's own reloader stops for good when a worker dies while starting (a
    syntax error saved into a running dev server), and with
    `reload_ignore_worker_failure` it can miss SIGTERM when a change lands while a
    worker is spawning. gunicorn's (asgi worker) answers every request with
    the error after a bad save, and never loads the fix: it does not watch the file
    that failed. watchfiles restarts the server on each change and, when it crashed,
    waits for the next save.
    """
    def run(settings: Settings, loop: str) -> None:
        import watchfiles

        serving = settings.model_copy(update={"reload": False})
        # watchfiles turns SIGTERM into KeyboardInterrupt once it has stopped the child.
        with contextlib.suppress(KeyboardInterrupt):
            watchfiles.run_process(APP_DIR, target=runner, args=(serving, loop))

    return run


def engine_run(settings: Settings) -> Callable[[Settings, str], None]:
    """The engine module's `run` (serving/engines/), restarted on each change in dev
    unless the engine's own reloader survives a bad save."""
    engine = engines.module(settings.engine)
    if settings.reload and not engine.RELOADS_ITSELF:
        return restart_on_change(engine.run)
    return engine.run


def serve(settings: Settings) -> None:
    loop = settings.resolved_loop
    export_to_environment(settings, loop)
    logs.announce(startup_line(settings, loop), settings.log_format)
    warning = memory.memory_warning(settings, memory.container_limit_mib())
    if warning:
        logs.announce(warning, settings.log_format, level=logging.WARNING)
    run = engine_run(settings)
    # Bound here, before the engine starts: a port taken since the check is one sentence,
    # and the listener gets a socket that already queues a scrape while it starts.
    metrics_socket = (bound_socket(settings.host, settings.metrics_port, METRICS_PORT_FROM)
                      if settings.metrics == "port" else None)
    # The workers' metrics directory and (WEBSERVER_METRICS=port) their listener.
    with metrics_listener.for_run(settings.metrics, metrics_socket):
        run(settings, loop)
