"""The project's layers, lowest first: each imports only those below it
(docs/architecture.md; tests/test_import_graph.py holds every module to it).

A module is in the layer of the longest package it starts with. Three things cross a
layer by name, never by import: serving builds the app's factory, the base and the
request layers read your declarations in app/custom.py (the settings' check, the body
limits), and the bench's ladder runs the command line (bench/ladder_serve.py).
"""

from __future__ import annotations

import importlib
from typing import Any

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("app.core",)),
    ("request layers", ("app.middleware",)),
    ("app", ("app",)),
    ("serving", ("serving",)),
    ("bench", ("bench",)),
    ("cli", ("cli",)),
)
APP_FACTORY = "app.main:create_app"
CUSTOM = "app.custom"


def layer_of(module: str) -> str | None:
    """The name of the layer `module` is in, or None (not the project's)."""
    found = [(len(package), name) for name, packages in LAYERS for package in packages
             if module == package or module.startswith(f"{package}.")]
    return max(found)[1] if found else None


def above_the_base(module: str) -> bool:
    """A module of app/ that a worker imports afresh (the request layers and the app,
    yours among them): the base's objects are shared with the launcher."""
    return "." in module and layer_of(module) in ("request layers", "app")


def by_name(target: str) -> Any:
    """`module:attribute`, imported when asked for."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def declared(name: str, default: Any = None) -> Any:
    """A declaration of yours in app/custom.py (AppSettings, BODY_LIMITS), or `default`
    in a project whose custom.py predates it."""
    return getattr(importlib.import_module(CUSTOM), name, default)
