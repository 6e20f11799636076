"""`bench app`: what the project's layers cost over bare FastAPI, in-process.

The same endpoint is called in-process (app_cost.py: no sockets, no server) through a
bare FastAPI app that registers only that route, through the project's app without
middleware, with each of its middleware alone, with the whole stack, and with the
layers the launcher puts in front (probes, proxy headers).

The variants take turns in short slices (a few hundred requests each, ~15 ms), the
first of each round rotating, for the whole duration. A slow spell of the machine
then falls on every variant alike, and each slice is compared with the bare app's
slice of the same round: the ratio reported is the median of those per-round ratios,
and the cost the median of the variant's slices. Lowest-of-N trials of 0.3 s each
(the first version) moved the ratio by 0.05 from one run to the next here.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.bench.app_cost import SLICE_BATCHES, cpu_per_request, warm_up
from app.bench.route import Route, RouteError

BARE = "bare FastAPI, this route only"
NO_MIDDLEWARE = "this app, no middleware"
ALL_MIDDLEWARE = "this app, all middleware"


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
    from app.core.server import create_served_app
    from app.main import create_app
    from app.middleware import MIDDLEWARE

    served = create_app()
    found = endpoint_route(served, route)
    bare = FastAPI()
    bare.add_api_route(found.path, found.endpoint, methods=sorted(found.methods))
    return [
        Variant(BARE, bare),
        Variant(NO_MIDDLEWARE, create_app(middleware=())),
        *(Variant(f"this app + {layer.__name__} only", create_app(middleware=(layer,)))
          for layer in MIDDLEWARE),
        Variant(ALL_MIDDLEWARE, served),
        Variant("as served (+ probes, proxy headers)", create_served_app()),
    ]


def measure(route: Route, duration: float) -> list[Variant]:
    """Each variant's CPU per request, slice by slice, round by round."""
    measured = variants(route)

    async def rotate() -> None:
        for variant in measured:
            await warm_up(variant.app, route)
        wall_end, turn = time.perf_counter() + duration, 0
        while turn == 0 or time.perf_counter() < wall_end:
            start = turn % len(measured)
            for variant in measured[start:] + measured[:start]:
                variant.slices_us.append(
                    await cpu_per_request(variant.app, route, SLICE_BATCHES))
            turn += 1

    asyncio.run(rotate())
    return measured
