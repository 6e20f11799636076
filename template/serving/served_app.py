"""The app as every engine serves it: create_app's (app/main.py) behind the
proxy-headers middleware, its streams ended at a stop (serving/open_streams.py), with
the orchestrator's probes and (WEBSERVER_METRICS=path) /metrics answered in front.

Every engine builds the app through this factory, so a forwarded request gets the
same answer on each (granian has no option of its own, and its helper ignored
X-Forwarded-Proto sent alone). An engine that needs more in each worker wraps it in a
factory of its own (serving/engines/granian.py, gunicorn.py).
"""

from __future__ import annotations

import sys

from starlette.types import ASGIApp

from serving.forwarded import ForwardedHeadersMiddleware
from serving.metrics_path import MetricsPathMiddleware
from serving.open_streams import OpenStreamsMiddleware
from serving.probes import ProbeMiddleware
from serving.settings import get_settings

APP_TARGET = f"{__name__}:create_served_app"  # what an engine's `factory=True` imports
# The template's modules of app/ that a launcher imports (and whose objects its workers
# share with it, `server_stopping` among them); the rest of app/ is yours.
TEMPLATES_OWN = ("app.core", "app.cli", "app.__main__")


def create_served_app(app: ASGIApp | None = None) -> ASGIApp:
    """The app (create_app's unless given) behind the proxy-headers middleware, with
    the probes answered in front."""
    # Here, not at the top: the launcher's process imports this module through an
    # engine's, and the app is the workers' to import (granian forks them from it).
    from app.main import create_app

    settings = get_settings()
    proxied = ForwardedHeadersMiddleware(app or create_app(), settings.trusted_proxies,
                                         settings.root_path)
    if settings.metrics == "path":  # answered before the app, as the probes are
        proxied = MetricsPathMiddleware(proxied)
    # A stream ends within the grace period, whatever its own setting.
    stream_stop_timeout = min(settings.stream_stop_timeout, settings.graceful_timeout)
    # The streams' layer outermost: a coroutine function, which every engine takes for
    # an ASGI 3 app; the probes' is a plain function inside it.
    return OpenStreamsMiddleware(ProbeMiddleware(proxied), stream_stop_timeout)


def yours(module: str) -> bool:
    """A module of app/ that is not the template's own (TEMPLATES_OWN)."""
    return module.startswith("app.") and not any(
        module == own or module.startswith(f"{own}.") for own in TEMPLATES_OWN)


def forget_your_modules() -> None:
    """In a worker forked from the launcher, before it builds the app: forget your
    modules the launcher imported (app/custom.py, which the settings check reads, and
    what it imports), so that the worker imports them from disk as a spawned one does,
    and the workers a SIGHUP starts serve the custom.py on disk."""
    for name in [name for name in sys.modules if yours(name)]:
        del sys.modules[name]
        package, _, module = name.rpartition(".")
        if package in sys.modules:  # `from app import custom` takes its attribute first
            vars(sys.modules[package]).pop(module, None)
