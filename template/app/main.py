"""The FastAPI application factory (served through `app.core.server:create_served_app`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from app.api import demo, echo, health
from app.core.config import PROJECT_NAME, get_settings
from app.custom import MIDDLEWARE as CUSTOM_MIDDLEWARE
from app.custom import customize
from app.middleware import MIDDLEWARE
from app.middleware.access_log import access_log_layer
from app.middleware.errors import configure_logging
from app.middleware.start_headers import fused
from app.routes import discovered_routers

STATIC_DIR = Path(__file__).parent / "static"
# FastAPI's documentation routes, off unless WEBSERVER_API_DOCS (docs/security.md).
NO_DOCS = {"openapi_url": None, "docs_url": None, "redoc_url": None}


TEMPLATE_ROUTERS = (health.router, echo.router, demo.router)


def routers() -> list[APIRouter]:
    """Every router the app includes, in order: the template's, then yours (app/routes/,
    a package the template never writes after the first render)."""
    return [*TEMPLATE_ROUTERS, *discovered_routers()]


def create_app(middleware: Sequence[type] | None = None,
               user_routers: Sequence[APIRouter] | None = None) -> FastAPI:
    """The app. `bench app` replaces the default middleware stack (`middleware`) and
    your routers from app/routes/ (`user_routers`) to compare variants."""
    settings = get_settings()
    configure_logging(settings.log_level)  # the app's lines on stderr, as the engines'
    app = FastAPI(title=PROJECT_NAME, **({} if settings.api_docs else NO_DOCS))
    # Every router included the FastAPI way, the template's as yours: dependencies,
    # responses, OpenAPI and body limits behave as FastAPI documents them
    # (tests/test_routing.py compares the app with a plain FastAPI one).
    for router in TEMPLATE_ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for router in discovered_routers() if user_routers is None else user_routers:
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
