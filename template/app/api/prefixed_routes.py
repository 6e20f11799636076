"""A route that tells a path outside its prefix "no" at once.

`/health/`'s routes come before the template's examples, and before yours when one of
yours would take their paths (app/main.py), so the requests that pass them are first
tried against them: FastAPI's matching costs each a regular expression and the checks
around it (docs/benchmarks.md). A path that does not even contain a route's first segment
(`/health`) cannot match it: this class answers that with one substring test and
leaves every other path to FastAPI, unchanged (`scope["path"]` holds the path the
route matches, after any root_path: containing the segment is necessary, never
sufficient). FastAPI's docs describe subclassing APIRoute ("Custom Request and
APIRoute class").
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope


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

