"""The FastAPI application factory (served through `app.core.server:create_served_app`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.api import demo, echo, health
from app.core.config import PROJECT_NAME
from app.core.routing import group_docs_routes, inline_routers
from app.custom import MIDDLEWARE as CUSTOM_MIDDLEWARE
from app.custom import customize
from app.middleware import MIDDLEWARE
from app.middleware.access_log import access_log_layer
from app.middleware.start_headers import fused
from app.routes import discovered_routers

STATIC_DIR = Path(__file__).parent / "static"


def create_app(middleware: Sequence[type] | None = None) -> FastAPI:
    """The app; `middleware` replaces the default stack (`bench app` compares them)."""
    app = FastAPI(title=PROJECT_NAME)
    app.include_router(health.router)
    app.include_router(echo.router)
    app.include_router(demo.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    inline_routers(app, (health.router, echo.router, demo.router))  # routing.py: why
    group_docs_routes(app)
    # Yours (app/routes/, app/custom.py): files the template never writes after the
    # first render, so `copier update` cannot conflict with them.
    for router in discovered_routers():
        app.include_router(router)
    # add_middleware wraps: add the innermost first so MIDDLEWARE[0] is outermost. The
    # access log sits inside the request id (MIDDLEWARE[0]), whose id it writes.
    # Header-only middleware next to each other run as one layer (start_headers.py).
    layers = middleware if middleware is not None else (
        *MIDDLEWARE[:1], *access_log_layer(), *MIDDLEWARE[1:], *CUSTOM_MIDDLEWARE)
    for middleware in reversed(fused(layers)):
        app.add_middleware(middleware)  # type: ignore[arg-type]
    customize(app)
    return app
