"""`bench app`: what the project's layers cost over bare FastAPI, in-process.

The same endpoint is called in-process (app_cost.py: no sockets, no server) through a
bare FastAPI app that registers only that route, through the project's app without
middleware, with each of its middleware alone, and with the whole stack. Trials are
interleaved and the lowest CPU per request of each variant is kept (the least
disturbed one); each is reported against bare FastAPI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.bench.app_cost import measure as measure_in_process
from app.bench.route import Route, RouteError


@dataclass
class Variant:
    name: str
    app: Any
    best_us: float | None = None


def _routes(routes: list[Any]) -> Iterator[APIRoute]:
    # FastAPI keeps included routers as entries of their own: walk into them.
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from _routes(route.original_router.routes)


def endpoint_route(app: FastAPI, route: Route) -> APIRoute:
    path = route.path.partition("?")[0]
    for candidate in _routes(app.router.routes):
        if candidate.path == path and route.method in candidate.methods:
            return candidate
    raise RouteError(f"{route.method} {path} is not a route of this app; `bench app` "
                     "compares one endpoint without path parameters, such as /health/.")


def variants(route: Route) -> list[Variant]:
    from app.main import create_app
    from app.middleware import MIDDLEWARE

    found = endpoint_route(create_app(), route)
    bare = FastAPI()
    bare.add_api_route(found.path, found.endpoint, methods=sorted(found.methods))
    return [
        Variant("bare FastAPI, this route only", bare),
        Variant("this app, no middleware", create_app(middleware=())),
        *(Variant(f"this app + {layer.__name__} only", create_app(middleware=(layer,)))
          for layer in MIDDLEWARE),
        Variant("this app, as served (all middleware)", create_app()),
    ]


def measure(route: Route, trials: int, seconds: float) -> list[Variant]:
    measured = variants(route)
    for _ in range(trials):
        for variant in measured:
            cost, _ = asyncio.run(measure_in_process(variant.app, route, seconds))
            variant.best_us = cost if variant.best_us is None else min(variant.best_us, cost)
    return measured
