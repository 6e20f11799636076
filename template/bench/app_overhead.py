"""`bench app`: what the project's layers cost over bare FastAPI, in-process.

A route is called in-process (app_cost.py: no sockets, no server) through a bare
FastAPI app set up as this app is (the same FastAPI options, app.main.fastapi_options:
the documentation routes and FastAPI's own telemetry off) that includes only the router
holding it, the FastAPI way: the baseline every ratio is to. `FastAPI()` with its
defaults and the same router is a second reference, not the goal: its defaults cost
more than the options this app turns off. Then the project's app without middleware;
with each of its middleware alone; and with the whole stack, the app as every engine
serves it (the probes, the proxy headers and the streams' end are layers of the app).

The variants take turns in short slices (a few hundred requests each, ~15 ms), the
first of each round rotating, for the whole duration. A slow spell of the machine
then falls on every variant alike, and each slice is compared with the bare app's
slice of the same round: the ratio reported is the median of those per-round ratios,
and the cost the median of the variant's slices. Lowest-of-N trials of 0.3 s each
(the first version) moved the ratio by 0.05 from one run to the next here.
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

from fastapi import APIRouter, FastAPI
from starlette.routing import Match

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
    from app.main import create_app, fastapi_options, observability_layers, routers
    from app.middleware import MIDDLEWARE
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
          for layer in (*observability_layers(), *MIDDLEWARE)),
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
