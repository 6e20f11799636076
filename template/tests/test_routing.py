"""The route layout that keeps lookups cheap (app/core/routing.py) answers as FastAPI's.

The served behaviour on both engines is in the request set (test_boot.py); these are
the cases a server of ours does not produce: a path prefix (root_path, as behind a
proxy that strips one), reverse lookups, and what instrumentation reads from scope.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from app.core.routing import ExactPathRoutes
from app.main import create_app

APP = create_app()


def call(path: str, method: str = "GET", root_path: str = "") -> tuple[int, dict[str, Any]]:
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": root_path + path, "raw_path": (root_path + path).encode(),
        "query_string": b"", "root_path": root_path, "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
    }
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    asyncio.run(APP(scope, receive, send))
    return status, scope


def test_docs_first_then_the_template_routes_where_their_routers_were_included() -> None:
    kinds = [type(route) for route in APP.router.routes]
    assert kinds[0] is ExactPathRoutes
    assert Route not in kinds  # every documentation route is in the entry
    paths = [route.path for route in APP.router.routes if isinstance(route, APIRoute)]
    assert paths.index("/health/") < paths.index("/demo/sleep")  # health, echo, demo
    assert kinds.index(Mount) > kinds.index(APIRoute)  # /static came after them


def test_documentation_behind_a_path_prefix() -> None:
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect", "/health/"):
        assert call(path, root_path="/api")[0] == 200, path
    assert call("/docs", method="POST", root_path="/api")[0] == 405
    assert call("/missing", root_path="/api")[0] == 404
    assert call("/docs/")[0] == 307  # Starlette's trailing-slash redirect still finds it


def test_reverse_lookup_and_the_route_in_scope() -> None:
    assert APP.url_path_for("swagger_ui_html") == "/docs"
    assert APP.url_path_for("health") == "/health/"
    status, scope = call("/openapi.json")
    assert status == 200
    assert isinstance(scope["route"], Route) and scope["route"].path == "/openapi.json"
