"""The FastAPI application factory: the app every engine serves
(`serving.served_app:create_served_app`), and the one your tests call."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute
from fastapi.staticfiles import StaticFiles
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount

from app import custom
from app.api import demo, echo, health
from app.api.prefixed_routes import first_segment
from app.core import tracing
from app.middleware import GUARDS, WITHIN
from app.middleware.access_log import access_log_layer
from app.middleware.cors import cors_layer
from app.middleware.errors import ServerErrorMiddleware, configure_logging
from app.middleware.fused_layers import fuse
from app.middleware.metrics import MetricsMiddleware
from app.middleware.request_id import RequestIdMiddleware
from app.middleware.request_limits import BodySizeBeforeYoursMiddleware
from app.middleware.security_headers import SecurityHeadersMiddleware
from app.middleware.timing import TimingMiddleware
from app.middleware.tracing import TracingMiddleware
from app.routes import discovered_routers
from serving.forwarded import ForwardedHeadersMiddleware
from serving.metrics_path import MetricsPathMiddleware
from serving.open_streams import OpenStreamsMiddleware
from serving.probes import ProbeMiddleware
from serving.settings import PROJECT_NAME, get_settings

STATIC_DIR = Path(__file__).parent / "static"
# FastAPI's documentation routes, off unless WEBSERVER_API_DOCS (docs/security.md).
NO_DOCS = {"openapi_url": None, "docs_url": None, "redoc_url": None}


# Yours first, then /health/ and the static files, then the template's examples: a
# request of yours is matched without first trying the template's routes (each costs,
# docs/benchmarks.md), and a path you also serve is yours. /health/ and /static come
# before yours where one of yours could take their paths (create_app).
HEALTH_ROUTER = health.router
EXAMPLE_ROUTERS = (echo.router, demo.router)
# Routes FastAPI matches on their path and method alone (exactly these classes: a
# subclass may match on more).
PLAIN_ROUTES = (APIRoute, APIWebSocketRoute)
# FastAPI's own OpenTelemetry instrumentation (0.165 and later), off: the template's
# layers give the same metrics and spans on every FastAPI release it supports, and
# FastAPI's would add a second server span per request; its checks cost time even
# with nothing configured (docs/benchmarks.md).
NO_TELEMETRY = ({"telemetry": {"tracing": False, "metrics": False, "logs": False}}
                if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {})


def fastapi_options() -> dict[str, object]:
    """The FastAPI options the app is built with, beyond its title, lifespan and
    middleware. `bench app` sets its bare FastAPI up with the same, to compare like
    with like (docs/benchmarks.md)."""
    return {**({} if get_settings().api_docs else NO_DOCS), **NO_TELEMETRY}


def serving_layers() -> tuple[type, ...]:
    """Outermost, what serving needs of every request (serving/): /metrics on the app's
    port (WEBSERVER_METRICS=path) and the orchestrator's probes answered before anything
    else, the proxy headers believed (WEBSERVER_TRUSTED_PROXIES, WEBSERVER_ROOT_PATH),
    and the streams still open at a stop ended (WEBSERVER_STREAM_STOP_TIMEOUT). Part of
    the app, not put around it: next to the template's other layers they run as one
    (fused_layers.py), and your tests meet them as a client does."""
    metrics_path = (MetricsPathMiddleware,) if get_settings().metrics == "path" else ()
    return (*metrics_path, ProbeMiddleware, ForwardedHeadersMiddleware, OpenStreamsMiddleware)


def observability_layers() -> tuple[type, ...]:
    """Outermost first: the metrics (WEBSERVER_METRICS), which count and time all the
    rest, then the request's span when OpenTelemetry traces are on (docs/observability.md)."""
    layers: list[type] = []
    if get_settings().metrics != "off":
        layers.append(MetricsMiddleware)
    if tracing.configured():
        layers.append(TracingMiddleware)
    return tuple(layers)


def request_id_layer() -> tuple[type, ...]:
    """The request id (WEBSERVER_REQUEST_ID), which the access log and the 500s' log
    lines carry."""
    return (RequestIdMiddleware,) if get_settings().request_id else ()


def answer_header_layers() -> tuple[type, ...]:
    """The headers every answer carries, each a setting of its own: Server-Timing
    (WEBSERVER_SERVER_TIMING, off: a debugging aid that costs every request), the
    security headers (WEBSERVER_SECURITY_HEADERS). Their cost: docs/benchmarks.md."""
    settings = get_settings()
    return ((TimingMiddleware,) if settings.server_timing else ()) + (
        (SecurityHeadersMiddleware,) if settings.security_headers else ())


def routers() -> list[APIRouter]:
    """Every router the app serves: /health/, yours (app/routes/, a package the template
    never writes after the first render), the template's examples (create_app says in
    which order)."""
    return [HEALTH_ROUTER, *discovered_routers(), *EXAMPLE_ROUTERS]


def middleware_layers(yours: Sequence[object] | None = None) -> tuple[object, ...]:
    """The whole stack, outermost first (app/middleware/__init__.py says why): what
    serving needs (probes, proxy headers, streams), metrics and the span, the request
    id, its access line, the headers every answer carries, CORS
    (WEBSERVER_CORS_ORIGINS), the Host check, yours, then the template's body limits and
    500s. A 500 raised by a middleware of yours is answered just outside it, still with
    CORS, and a body it reads is held to the size limits there."""
    yours = custom.MIDDLEWARE if yours is None else yours
    # Only with middleware of yours: a 500 it raises, and a body it reads.
    before_yours = (ServerErrorMiddleware, BodySizeBeforeYoursMiddleware) if yours else ()
    return (*serving_layers(), *observability_layers(), *request_id_layer(), *access_log_layer(),
            *answer_header_layers(), *cors_layer(), *GUARDS, *before_yours, *yours, *WITHIN)


def template_routes() -> list[BaseRoute]:
    """/health/'s routes (app/api/health.py) and the static files, as routes of the app
    itself rather than an included router: FastAPI matches and dispatches a route of
    an included router through its include machinery, which costs more per request
    than a route of the app (docs/benchmarks.md). The router's own
    route objects, so what you add to them (a dependency, a response model) stays, and
    routing and OpenAPI are FastAPI's own (tests/test_routing.py)."""
    return [*HEALTH_ROUTER.routes, Mount("/static", app=StaticFiles(directory=STATIC_DIR),
                                         name="static")]


def clear_of_ours(yours: Sequence[APIRouter], ours: Sequence[BaseRoute]) -> bool:
    """Whether no route of yours can answer a request for a path of ours, whatever the
    request, judged from the routes your routers hold now: each router a plain
    APIRouter, each route a plain FastAPI route (matched on its path and method alone)
    at `/` or under a fixed first segment other than ours (`/items/{item_id}`, not
    `/{slug}` nor `/static/{name}`), named unlike ours (`url_path_for`). Anything else
    (a catch-all, a Host route, a router or route class of yours, a router included in
    yours) keeps ours first."""
    segments = {first_segment(route.path) for route in ours}  # type: ignore[attr-defined]
    names = {route.name for route in ours}  # type: ignore[attr-defined]
    routes = [route for router in yours for route in router.routes]
    return all(type(router) is APIRouter for router in yours) and all(
        type(route) in PLAIN_ROUTES and route.name not in names
        and (route.path == "/" or first_segment(route.path) not in {None, *segments})
        for route in routes)


def as_middleware(layer: object) -> Middleware:
    """A class or factory, or a Middleware(cls, **options) as Starlette's docs write it."""
    return layer if isinstance(layer, Middleware) else Middleware(layer)  # type: ignore[arg-type]


def create_app(middleware: Sequence[object] | None = None,
               user_routers: Sequence[APIRouter] | None = None) -> FastAPI:
    """The app. `bench app` replaces the middleware stack (`middleware`) and your routers
    from app/routes/ (`user_routers`) to compare variants."""
    settings = get_settings()
    # The app's lines on stderr, as the engines', text or JSON (app/core/logs.py).
    configure_logging(settings.log_level, settings.log_format)
    layers = middleware_layers() if middleware is None else middleware
    # The template's middleware next to each other run as one layer (fused_layers.py).
    app = FastAPI(title=PROJECT_NAME, lifespan=getattr(custom, "lifespan", None),
                  middleware=[as_middleware(layer) for layer in fuse(layers)],
                  **fastapi_options())
    # Every router included the FastAPI way, the template's as yours: dependencies,
    # responses, OpenAPI and body limits behave as FastAPI documents them
    # (tests/test_routing.py compares the app with a plain FastAPI one).
    # Yours first, where none of them can answer a path of /health/ or /static: a
    # request of yours is then matched without first trying the template's routes
    # (docs/benchmarks.md), and what each path gets is the same either way.
    # Otherwise /health/ and /static come first, staying the probes' and the files'.
    first = len(app.router.routes)  # FastAPI's docs routes, when on
    yours = discovered_routers() if user_routers is None else user_routers
    for router in yours:
        app.include_router(router)
    ours = template_routes()
    at = len(app.router.routes) if clear_of_ours(yours, ours) else first
    app.router.routes[at:at] = ours
    for router in EXAMPLE_ROUTERS:
        app.include_router(router)
    custom.customize(app)
    return app
