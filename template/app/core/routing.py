"""Serve the template's own routers from the app's route list.

FastAPI 0.165 keeps an included router as one entry that resolves its routes on every
request: about 7 µs a request on the development machine, a sixth of a trivial
route's whole cost (`bench app`, docs/benchmarks.md). The template's routers are
included plainly (no prefix, dependencies or tags added at inclusion), so moving
their routes onto the app changes nothing but that cost. Your routers in app/routes/
stay included as FastAPI includes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Register each route of `router` on the app itself."""
    for route in router.routes:
        if isinstance(route, APIRoute):
            app.add_api_route(
                route.path, route.endpoint, methods=sorted(route.methods), name=route.name,
                tags=route.tags, response_model=route.response_model,
                status_code=route.status_code, summary=route.summary,
                include_in_schema=route.include_in_schema,
            )
        elif isinstance(route, APIWebSocketRoute):
            app.add_api_websocket_route(route.path, route.endpoint, name=route.name)


def inline_routers(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Replace the inclusion of each of `routers` by its routes, in place."""
    wanted = {id(router) for router in routers}
    for entry in list(app.router.routes):
        router = getattr(entry, "original_router", None)  # FastAPI's included-router entry
        if router is not None and id(router) in wanted:
            app.router.routes.remove(entry)
            add_routes(app, router)
