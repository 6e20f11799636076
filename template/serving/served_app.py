"""The app as every engine serves it: create_app's (app/main.py), built by name.

Every engine builds the app through this factory. The proxy headers, the end of the
streams at a stop, the probes and /metrics are the app's own first layers
(app/middleware/__init__.py), so a request gets the same answer on each engine. An
engine that needs more in each worker wraps it in a factory of its own
(serving/engines/granian.py, serving/engines/gunicorn/).
"""

from __future__ import annotations

import sys

from app.core import layers
from app.core.asgi import ASGIApp

APP_TARGET = f"{__name__}:create_served_app"  # what an engine's `factory=True` imports


def create_served_app(app: ASGIApp | None = None) -> ASGIApp:
    """The app (create_app's unless given; a given one is served as it is)."""
    if app is not None:
        return app
    # By name, when called: the launcher's process imports this module through an
    # engine's, and the app is the workers' to import (granian forks them from it).
    return layers.by_name(layers.APP_FACTORY)()


def forget_your_modules() -> None:
    """In a worker forked from the launcher, before it builds the app: forget the
    modules above the base that the launcher imported (app/custom.py, which the settings
    check reads, and what it imports), so that the worker imports them from disk as a
    spawned one does, and the workers a SIGHUP starts serve the custom.py on disk."""
    for name in [name for name in sys.modules if layers.above_the_base(name)]:
        del sys.modules[name]
        package, _, module = name.rpartition(".")
        if package in sys.modules:  # `from app import custom` takes its attribute first
            vars(sys.modules[package]).pop(module, None)
