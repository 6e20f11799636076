"""`bench app`: what the project's layers cost over bare FastAPI, in-process.

A route is called in-process (app_cost.py) through a bare FastAPI app set up as this app
is (app.main.fastapi_options) with only the route's router, the baseline of every ratio;
`FastAPI()` with its defaults, a second reference; then the project's app without
middleware, with each middleware alone, and with the whole stack, as engines serve it.
The variants take turns in short slices, the first of each round rotating, so a slow
spell falls on all alike: a ratio is the median of per-round ratios to the bare app's
slice of the same round, a cost the median of the variant's slices.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.framework import APIRouter, FastAPI, Match
from bench.app_cost import SLICE_BATCHES, cpu_per_request, request_scope, warm_up
from bench.route import Route, RouteError

BARE = "bare FastAPI, same setup, this router only"
BARE_DEFAULTS = "FastAPI() defaults, this router only"
NO_MIDDLEWARE = "this app, no middleware"
ALL_MIDDLEWARE = "this app, all middleware"  # as served


@dataclass
class Variant:
    name: str
    app: Any
    slices_us: list[float] = field(default_factory=list)  # one per round

    @property
    def cost_us(self) -> float:
        return statistics.median(self.slices_us)

    def ratio_to(self, other: Variant) -> float:
        """The median over rounds of this variant's slice to the other's."""
        return statistics.median(
            mine / theirs for mine, theirs in zip(self.slices_us, other.slices_us, strict=True))


def owning_router(routers: Sequence[APIRouter], route: Route) -> APIRouter:
    """The router with a route that fully matches this request."""
    scope = request_scope(route)
    for router in routers:
        if any(candidate.matches(scope)[0] is Match.FULL for candidate in router.routes):
            return router
    raise RouteError(f"{route.method} {route.path} is not a route of this app's routers; "
                     "`bench app` measures one of them, such as /health/.")


def variants(route: Route, extra_routers: Sequence[APIRouter] = ()) -> list[Variant]:
    """`extra_routers` are included after the app's own, as routers of app/routes/ are."""
    from app.main import create_app, fastapi_options, routers
    from app.middleware import middleware_layers
    from app.routes import discovered_routers
    from serving.served_app import create_served_app

    user_routers = [*discovered_routers(), *extra_routers]

    def app(middleware: Sequence[type] | None = None) -> FastAPI:
        return create_app(middleware=middleware, user_routers=user_routers)

    use_multiprocess_metrics()
    owner = owning_router([*routers(), *extra_routers], route)
    served = app()
    # The metrics and traces (when on) measured alone too, as the other layers are.
    return [
        Variant(BARE, bare_fastapi(owner, fastapi_options())),
        Variant(BARE_DEFAULTS, bare_fastapi(owner, {})),
        Variant(NO_MIDDLEWARE, app(middleware=())),
        *(Variant(f"this app + {layer.__name__} only", app(middleware=(layer,)))
          for layer in middleware_layers(yours=()) if isinstance(layer, type)),
        Variant(ALL_MIDDLEWARE, create_served_app(served)),  # the app as served
    ]


def bare_fastapi(router: APIRouter, options: dict[str, object]) -> FastAPI:
    """FastAPI with `options`, including one router the FastAPI way, as create_app does."""
    bare = FastAPI(**options)  # type: ignore[arg-type]
    bare.include_router(router)
    return bare


def use_multiprocess_metrics() -> None:
    """The metrics as served: written to prometheus-client's multiprocess files (their
    writes cost twice an in-memory one), in a directory of this run, which the files
    name for as long as the process runs."""
    from app.core.metrics import MULTIPROC_ENV, server_metrics

    if MULTIPROC_ENV not in os.environ:
        directory = tempfile.mkdtemp(prefix="bench-app-metrics-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        os.environ[MULTIPROC_ENV] = directory
    server_metrics()  # made now, in the files (the layers are built at the first call)


def measure(route: Route, duration: float,
            extra_routers: Sequence[APIRouter] = ()) -> list[Variant]:
    """Each variant's CPU per request, slice by slice, round by round."""
    return rotate(variants(route, extra_routers), route, duration)


def rotate(measured: list[Variant], route: Route, duration: float) -> list[Variant]:
    """The variants in turn, a slice each per round, the first of each round rotating,
    until `duration` seconds have passed (one round at least)."""

    async def turns() -> None:
        for variant in measured:
            await warm_up(variant.app, route)
        wall_end, turn = time.perf_counter() + duration, 0
        while turn == 0 or time.perf_counter() < wall_end:
            start = turn % len(measured)
            for variant in measured[start:] + measured[:start]:
                variant.slices_us.append(
                    await cpu_per_request(variant.app, route, SLICE_BATCHES))
            turn += 1

    asyncio.run(turns())
    return measured
