"""The FastAPI application factory: the app every engine serves
(`serving.served_app:create_served_app`), and the one your tests call."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from app import custom
from app.api import examples, health
from app.api.prefixed_routes import first_segment
from app.core import database
from app.core.framework import (
    APIRoute,
    APIRouter,
    APIWebSocketRoute,
    BaseRoute,
    FastAPI,
    Middleware,
    Mount,
    StaticFiles,
)
from app.core.settings import PROJECT_NAME, get_settings
from app.middleware import middleware_layers
from app.middleware.errors import configure_logging
from app.middleware.fused_layers import fuse
from app.routes import discovered_routers

STATIC_DIR = Path(__file__).parent / "static"
# FastAPI's documentation routes, off unless WEBSERVER_API_DOCS (docs/security.md).
NO_DOCS = {"openapi_url": None, "docs_url": None, "redoc_url": None}


# Yours first, then /health/ and the static files, then the template's examples: a
# request of yours is matched without first trying the template's routes (each costs,
# docs/benchmarks.md), and a path you also serve is yours. /health/ and /static come
# before yours where one of yours could take their paths (create_app).
HEALTH_ROUTER = health.router
EXAMPLE_ROUTERS = examples.ROUTERS
# Routes FastAPI matches on their path and method alone (exactly these classes: a
# subclass may match on more).
PLAIN_ROUTES = (APIRoute, APIWebSocketRoute)
# FastAPI's own OpenTelemetry instrumentation (in its newer releases), off: the template's
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


def routers() -> list[APIRouter]:
    """Every router the app serves: /health/, yours (app/routes/, a package the template
    never writes after the first render), the template's examples (create_app says in
    which order)."""
    examples = EXAMPLE_ROUTERS if get_settings().examples else ()
    return [HEALTH_ROUTER, *discovered_routers(), *examples]


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
    layers = middleware_layers(custom.MIDDLEWARE) if middleware is None else middleware
    # The template's middleware next to each other run as one layer (fused_layers.py).
    # With a database, its pool per worker around your lifespan (app/core/database.py).
    app = FastAPI(title=PROJECT_NAME,
                  lifespan=database.lifespan(getattr(custom, "lifespan", None)),
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
    for router in EXAMPLE_ROUTERS if settings.examples else ():
        app.include_router(router)
    database.add_error_handlers(app)  # 503 when the database does not answer
    custom.customize(app)
    return app
