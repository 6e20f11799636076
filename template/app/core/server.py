"""The launcher: start the chosen engine on an explicit loop through its Python API."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp

from app.core import drain, logs, loops, metrics
from app.core.config import PROJECT_SLUG, Settings, get_settings
from app.core.setting_specs import BY_NAME, SETTINGS

# Every engine builds the app through this factory, wrapped in the same proxy-headers
# middleware (app/core/forwarded.py), so a forwarded request gets the same answer on
# each (granian has no option of its own, and its helper ignored X-Forwarded-Proto
# sent alone).
APP_TARGET = "app.core.server:create_served_app"
UVICORN_WS_PING_TIMEOUT = 20.0
GRANIAN_RSS_SAMPLE_SECONDS = 5
APP_DIR = Path(__file__).resolve().parents[1]
DRAIN_TIMEOUT = 5.0
# uvicorn's and gunicorn's default, kept when WEBSERVER_WS_MAX_MESSAGE_SIZE=0; granian
# has no such setting (app/middleware/websocket_limits.py checks each message instead).
ENGINE_WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024


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
    for spec in SETTINGS:
        os.environ[spec.env] = spec.text(getattr(settings, spec.name))
    os.environ[BY_NAME["loop"].env] = loop


def create_served_app(app: ASGIApp | None = None) -> ASGIApp:
    """The app (create_app's unless given) behind the proxy-headers middleware,
    whichever engine serves it, with the orchestrator's probes answered in front."""
    from app.core.forwarded import ForwardedHeadersMiddleware
    from app.core.probes import ProbeMiddleware
    from app.main import create_app

    settings = get_settings()
    if settings.engine == "granian":
        drain.refuse_on_signal(settings.port)  # each worker has its own listener
    proxied = ForwardedHeadersMiddleware(app or create_app(), settings.trusted_proxies,
                                         settings.root_path)
    if settings.metrics == "path":  # answered before the app, as the probes are
        proxied = metrics.MetricsPathMiddleware(proxied)
    if settings.engine == "gunicorn" and not settings.websockets:
        from app.core.gunicorn_app import WebSocketsOff

        return WebSocketsOff(ProbeMiddleware(proxied))
    return ProbeMiddleware(proxied)


class ListenError(Exception):
    """The engine could not listen where it was asked, as one sentence."""


def listen_address(host: str, port: int, where: str = "--port, WEBSERVER_PORT") -> str:
    """The numeric address to hand the engine, after a trial bind of host:port.

    Both engines report these failures their own way (granian: a traceback and a Rust
    backtrace, and no host names at all); the trial turns each into one sentence, the
    same on both, and a name such as `localhost` into the address both accept.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError):
        raise ListenError(
            f"the host {host!r} cannot be resolved: give an address such as 127.0.0.1 or "
            "0.0.0.0, or a name this machine resolves (--host, WEBSERVER_HOST)."
        ) from None
    with socket.socket(family, kind, proto) as trial:
        # As the engines bind: a port left in TIME_WAIT is free, a listening one is not.
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind(address)
        except OSError as error:
            raise ListenError(_bind_failure(host, port, error, where)) from None
    return address[0]


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


def uvicorn_config(settings: Settings, loop: str):  # -> uvicorn.Config
    import uvicorn

    from app.core import head_limits

    return uvicorn.Config(
        APP_TARGET,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        reload=settings.reload,
        reload_dirs=[str(APP_DIR)] if settings.reload else None,
        loop=loops.engine_value("uvicorn", loop),
        # The parser's protocol with the head limits granian applies (head_limits.py);
        # HTTP/2 keeps zttp's own, which uvicorn requires by name.
        http="zttp" if settings.http2 else head_limits.uvicorn_protocol(settings.resolved_http),
        http2=settings.http2,
        h11_max_incomplete_event_size=settings.max_header_size,
        ws="auto" if settings.websockets else "none",
        log_level=settings.log_level,
        log_config={**uvicorn.config.LOGGING_CONFIG,  # its lines as the app's (logs.py)
                    **logs.engine_formatters(("default", "access"), settings.log_format)},
        access_log=False,  # the app's own access log, the same on both engines
        backlog=settings.backlog,
        limit_concurrency=settings.max_concurrency or None,
        limit_max_requests=settings.worker_max_requests or None,
        limit_max_requests_jitter=settings.worker_max_requests // 10,
        timeout_keep_alive=settings.keepalive_timeout,
        timeout_graceful_shutdown=settings.graceful_timeout,
        proxy_headers=False,  # applied by create_served_app, as under granian
        ws_max_size=settings.ws_max_message_size or ENGINE_WS_MAX_MESSAGE_SIZE,
        ws_ping_interval=settings.ws_ping_interval or None,
        ws_ping_timeout=UVICORN_WS_PING_TIMEOUT if settings.ws_ping_interval else None,
    )


def run_uvicorn(settings: Settings, loop: str) -> None:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import ChangeReload

    from app.core.uvicorn_supervisor import DrainingServer, WorkerSupervisor

    config = uvicorn_config(settings, loop)
    sockets = [config.bind_socket()]
    # A supervisor whenever a worker may need replacing, one worker included; a single
    # process otherwise, as uvicorn runs it.
    supervised = (settings.workers > 1 or settings.worker_max_requests > 0
                  or settings.respawn_failed_workers)
    with contextlib.suppress(KeyboardInterrupt):
        if settings.reload:  # the reloader pickles the server for its child: plain
            ChangeReload(config, target=uvicorn.Server(config).run, sockets=sockets).run()
        elif supervised:
            supervisor = WorkerSupervisor(config, sockets=sockets)
            supervisor.respawn_failed = settings.respawn_failed_workers
            supervisor.drain_timeout = drain_timeout(settings)
            supervisor.run()
            if supervisor.failed:
                sys.exit(1)
        else:
            server = DrainingServer(config, sockets, drain_timeout=drain_timeout(settings))
            server.run(sockets=sockets)
            if not server.started:
                sys.exit(STARTUP_FAILURE)


def drain_timeout(settings: Settings) -> float:
    """How long SIGTERM waits for queued connections to be accepted (app/core/drain.py),
    before the engine's own grace period for the requests in flight."""
    return min(DRAIN_TIMEOUT, settings.graceful_timeout)


def run_granian(settings: Settings, loop: str) -> None:
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.http import HTTP1Settings, HTTP2Settings
    from granian.log import LOGGING_CONFIG, LogLevels

    server = Granian(
        APP_TARGET,
        factory=True,
        address=settings.host,
        port=settings.port,
        # granian's default interface is RSGI; FastAPI speaks ASGI.
        interface=Interfaces.ASGI,
        workers=settings.workers,
        runtime_threads=settings.threads,
        loop=Loops(loops.engine_value("granian", loop)),
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
        log_dictconfig={"handlers": {name: {**handler, "stream": "ext://sys.stderr"}
                                     for name, handler in LOGGING_CONFIG["handlers"].items()},
                        **logs.engine_formatters(("generic", "access"), settings.log_format)},
        log_access=False,  # the app's own access log, the same on both engines
        respawn_failed_workers=settings.respawn_failed_workers,
        workers_lifetime=settings.worker_lifetime or None,
        workers_max_rss=settings.worker_max_memory or None,
        # granian samples RSS every 30 s by default; a leak is caught sooner this way.
        rss_sample_interval=GRANIAN_RSS_SAMPLE_SECONDS,
        workers_kill_timeout=settings.graceful_timeout,
    )

    @server.on_startup
    def drain_on_sigterm() -> None:
        # Runs in granian's main process once it has set its own signal handlers.
        signal.signal(signal.SIGTERM, drain.draining(
            signal.getsignal(signal.SIGTERM), settings.port, drain_timeout(settings),
            refuse=drain.refuse_in_workers))

    server.serve()


def gunicorn_options(settings: Settings, loop: str) -> dict[str, object]:
    """gunicorn's settings for this run, by gunicorn's names."""
    from app.core import head_limits

    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return {
        "bind": [f"{host}:{settings.port}"],
        # gunicorn's native asgi worker, with the head's size and time (head_limits.py).
        "worker_class": head_limits.GUNICORN_WORKER,
        "workers": settings.workers,
        "asgi_loop": loops.engine_value("gunicorn", loop),
        "http_parser": loops.http_engine_value("gunicorn", settings.resolved_http),
        "backlog": settings.backlog,
        "keepalive": settings.keepalive_timeout,
        "graceful_timeout": settings.graceful_timeout,
        "max_requests": settings.worker_max_requests,
        "max_requests_jitter": settings.worker_max_requests // 10,
        "loglevel": settings.log_level,
        "errorlog": "-",  # its lines on stderr, as the other engines' (docs/security.md)
        "logger_class": logs.gunicorn_logger(settings.log_format),  # app/core/logs.py
        "accesslog": None,  # the app's own access log, the same on every engine
        # The proxy headers are the app's layer's (create_served_app), as on the other
        # engines: gunicorn rewrites no scheme, and its trusted addresses only say who
        # may open cleartext HTTP/2 (gunicorn answers h2c to those alone).
        "secure_scheme_headers": {},
        "forwarded_allow_ips": settings.trusted_proxies,
        "websocket_max_message_size": (settings.ws_max_message_size
                                       or ENGINE_WS_MAX_MESSAGE_SIZE),
        "http_protocols": "h2,h1" if settings.http2 else "h1",
        "http2_cleartext": "both" if settings.http2 else "off",
        # Its control socket would go in $HOME/.gunicorn, which the image's user lacks
        # (and the root filesystem is read-only in Kubernetes).
        "control_socket_disable": True,
    }


def run_gunicorn(settings: Settings, loop: str) -> None:
    from app.core.gunicorn_app import FAILED, GunicornApp

    server = GunicornApp(gunicorn_options(settings, loop), settings.port,
                         drain_timeout(settings), settings.respawn_failed_workers)
    try:
        server.run()
    except SystemExit:
        if server.failed:
            sys.exit(FAILED)
        raise


def restart_on_change(runner: Callable[[Settings, str], None]) -> Callable[[Settings, str], None]:
    """Restart a non-reloading server on every change, as uvicorn's reloader does.

    granian's own reloader (2.8.9) stops for good when a worker dies while starting (a
    syntax error saved into a running dev server), and with
    `reload_ignore_worker_failure` it can miss SIGTERM when a change lands while a
    worker is spawning. gunicorn's (27.0.1, asgi worker) answers every request with
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


ENGINE_RUNNERS: dict[str, Callable[[Settings, str], None]] = {
    "uvicorn": run_uvicorn,
    "granian": run_granian,
    "gunicorn": run_gunicorn,
}


DEV_RUNNERS: dict[str, Callable[[Settings, str], None]] = {
    "uvicorn": run_uvicorn,  # uvicorn's reloader already survives a bad save
    "granian": restart_on_change(run_granian),
    "gunicorn": restart_on_change(run_gunicorn),
}


def serve(settings: Settings) -> None:
    loop = settings.resolved_loop
    publish(settings, loop)
    logs.announce(startup_line(settings, loop), settings.log_format)
    runners = DEV_RUNNERS if settings.reload else ENGINE_RUNNERS
    # The workers' metrics directory and (WEBSERVER_METRICS=port) their listener.
    with metrics.for_run(settings.metrics, settings.host, settings.metrics_port):
        runners[settings.engine](settings, loop)
