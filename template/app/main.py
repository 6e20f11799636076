"""The FastAPI application factory (served through `app.core.server:create_served_app`)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from app.api import demo, echo, health
from app.core import tracing
from app.core.config import PROJECT_NAME, get_settings
from app.custom import MIDDLEWARE as CUSTOM_MIDDLEWARE
from app.custom import customize
from app.middleware import MIDDLEWARE
from app.middleware.access_log import access_log_layer
from app.middleware.errors import configure_logging
from app.middleware.metrics import MetricsMiddleware
from app.middleware.start_headers import fused
from app.middleware.tracing import TracingMiddleware
from app.routes import discovered_routers

STATIC_DIR = Path(__file__).parent / "static"
# FastAPI's documentation routes, off unless WEBSERVER_API_DOCS (docs/security.md).
NO_DOCS = {"openapi_url": None, "docs_url": None, "redoc_url": None}


TEMPLATE_ROUTERS = (health.router, echo.router, demo.router)
# FastAPI's own OpenTelemetry instrumentation (0.165 and later), off: the template's
# layers give the same metrics and spans on every FastAPI release it supports, and
# FastAPI's would add a second server span per request. Even with nothing configured,
# its checks cost ~6 µs a request (docs/benchmarks.md).
NO_TELEMETRY = ({"telemetry": {"tracing": False, "metrics": False, "logs": False}}
                if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {})


def observability_layers() -> tuple[type, ...]:
    """Outermost first: the metrics (WEBSERVER_METRICS), which count and time all the
    rest, then the request's span when OpenTelemetry traces are on (docs/observability.md)."""
    layers: list[type] = []
    if get_settings().metrics != "off":
        layers.append(MetricsMiddleware)
    if tracing.configured():
        layers.append(TracingMiddleware)
    return tuple(layers)


def routers() -> list[APIRouter]:
    """Every router the app includes, in order: the template's, then yours (app/routes/,
    a package the template never writes after the first render)."""
    return [*TEMPLATE_ROUTERS, *discovered_routers()]


def create_app(middleware: Sequence[type] | None = None,
               user_routers: Sequence[APIRouter] | None = None) -> FastAPI:
    """The app. `bench app` replaces the default middleware stack (`middleware`) and
    your routers from app/routes/ (`user_routers`) to compare variants."""
    settings = get_settings()
    # The app's lines on stderr, as the engines', text or JSON (app/core/logs.py).
    configure_logging(settings.log_level, settings.log_format)
    app = FastAPI(title=PROJECT_NAME, **({} if settings.api_docs else NO_DOCS), **NO_TELEMETRY)
    # Every router included the FastAPI way, the template's as yours: dependencies,
    # responses, OpenAPI and body limits behave as FastAPI documents them
    # (tests/test_routing.py compares the app with a plain FastAPI one).
    for router in TEMPLATE_ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for router in discovered_routers() if user_routers is None else user_routers:
        app.include_router(router)
    # add_middleware wraps: add the innermost first so MIDDLEWARE[0] is outermost. The
    # access log sits inside the request id (MIDDLEWARE[0]), whose id it writes, and
    # the span (observability_layers), whose trace id it writes.
    # Header-only middleware next to each other run as one layer (start_headers.py).
    layers = middleware if middleware is not None else (
        *observability_layers(), *MIDDLEWARE[:1], *access_log_layer(), *MIDDLEWARE[1:],
        *CUSTOM_MIDDLEWARE)
    for middleware in reversed(fused(layers)):
        app.add_middleware(middleware)  # type: ignore[arg-type]
    customize(app)
    return app
