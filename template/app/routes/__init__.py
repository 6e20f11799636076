"""Your routers. Every module in this package that defines `router` (a FastAPI
APIRouter) is included by `create_app`, in module-name order.

The template ships only this file and never writes another one here, so routes you add
cannot conflict with `copier update`. Helpers without a `router` are left alone.
"""

from __future__ import annotations

import importlib
import pkgutil

from app.core.framework import APIRouter


def discovered_routers() -> list[APIRouter]:
    routers = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        router = getattr(module, "router", None)
        if isinstance(router, APIRouter):
            routers.append(router)
    return routers
