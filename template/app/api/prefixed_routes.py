"""A route that tells a path outside its prefix "no" at once.

FastAPI tries the routes in turn, each with a regular expression and the checks around
it, and `/health/`'s come before the examples (and before yours that would take their
paths, app/main.py). A path that does not contain a route's first segment (`/health`)
cannot match it: one substring test answers it, and every other path goes to FastAPI
unchanged (`scope["path"]` is after any root_path: the test is necessary, not sufficient).
"""

from __future__ import annotations

from typing import Any

from app.core.asgi import Scope
from app.core.framework import APIRoute, Match


def first_segment(path: str) -> str | None:
    """`/health` of `/health/detailed`; None when the first segment is a parameter, or
    the path is `/`."""
    segment = "/" + path.lstrip("/").split("/", 1)[0]
    return None if segment == "/" or "{" in segment else segment


class PrefixedRoute(APIRoute):
    """An APIRoute (a router's `route_class`, app/api/health.py)."""

    def __init__(self, path: str, endpoint: Any, **options: Any) -> None:
        super().__init__(path, endpoint, **options)
        self.segment = first_segment(self.path)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if self.segment is not None and self.segment not in scope["path"]:
            return Match.NONE, {}
        return super().matches(scope)

