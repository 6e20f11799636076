"""How the app's routes are laid out, for what each request pays to find its own.

Starlette tries the routes in order, one regular expression each, until one matches.

- FastAPI 0.165 keeps an included router as one entry that resolves its routes on every
  request: about 7 µs a request on the development machine, a sixth of a trivial
  route's whole cost (`bench app`, docs/benchmarks.md). The template's routers are
  included plainly (no prefix, dependencies or tags added at inclusion), so moving
  their routes onto the app, where the inclusion stood, changes nothing but that cost.
  Your routers in app/routes/ stay included as FastAPI includes them.
- FastAPI puts its four documentation routes first, so every other request failed
  four matches before reaching its own (about 2 µs). They are kept first, as one
  entry that finds them with a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Register each route of `router` on the app itself (appended)."""
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
    """Replace the inclusion of each of `routers` by its routes, where it stood."""
    wanted = {id(router) for router in routers}
    routes = app.router.routes
    for entry in list(routes):
        router = getattr(entry, "original_router", None)  # FastAPI's included-router entry
        if router is not None and id(router) in wanted:
            at = routes.index(entry)
            del routes[at]
            count = len(routes)
            add_routes(app, router)
            added = routes[count:]
            del routes[count:]
            routes[at:at] = added


class ExactPathRoutes(BaseRoute):
    """Routes without path parameters, found by one dictionary lookup."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = tuple(routes)
        self.by_path = {route.path: route for route in self.routes}

    def _route(self, scope: Scope) -> Route | None:
        if scope["type"] != "http":
            return None
        if not scope.get("root_path"):
            return self.by_path.get(scope["path"])
        # Behind a path prefix: each route strips it the way Starlette does.
        for route in self.routes:
            if route.matches(scope)[0] is not Match.NONE:
                return route
        return None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        route = self._route(scope)
        return (Match.NONE, {}) if route is None else route.matches(scope)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                continue
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._route(scope)
        assert route is not None, "the router calls handle only after matches()"
        scope["route"] = route  # what instrumentation reads, as if matched on its own
        await route.handle(scope, receive, send)


def group_docs_routes(app: FastAPI) -> None:
    """FastAPI's documentation routes, still first, as one ExactPathRoutes entry."""
    paths = {app.openapi_url, app.docs_url, app.swagger_ui_oauth2_redirect_url, app.redoc_url}
    routes = app.router.routes
    docs = [route for route in routes
            if type(route) is Route and route.path in paths and "{" not in route.path]
    if docs:
        at = routes.index(docs[0])
        for route in docs:
            routes.remove(route)
        routes.insert(at, ExactPathRoutes(docs))
