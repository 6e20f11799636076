"""Liveness and a report of what is actually serving this process.

The report gives out what an attacker would like to know (engine, parser, Python
version, pid): it answers only its status unless WEBSERVER_HEALTH_DETAIL=full
(docs/security.md). The startup line on stderr says the same to whoever runs it.
"""

from __future__ import annotations

import asyncio
import os
import platform

from app.api.prefixed_routes import PrefixedRoute
from app.core.framework import APIRouter, Request
from app.core.settings import get_settings

# Before the examples (and yours, when one takes /health/): a path that passes them
# does so with one substring test (prefixed_routes.py).
router = APIRouter(prefix="/health", tags=["health"], route_class=PrefixedRoute)


@router.get("/")
async def health() -> dict[str, str]:
    return {"status": "ok"}


def running_loop_class() -> str:
    try:
        running = type(asyncio.get_running_loop())
    except RuntimeError:  # no asyncio loop: Hypercorn's trio worker
        import trio

        trio.lowlevel.current_task()  # raises unless trio runs this handler
        return "trio.run"  # trio has no loop class: the call that runs it
    return f"{running.__module__}.{running.__qualname__}"


@router.get("/detailed")
async def health_detailed(request: Request) -> dict[str, str | int]:
    settings = get_settings()
    if settings.health_detail != "full":
        return {"status": "ok"}
    return {
        "status": "ok",
        "engine": settings.engine,
        "loop": settings.resolved_loop,
        # The class of the loop running this handler, not the configured name: it
        # is the proof that the engine honoured the choice.
        "loop_class": running_loop_class(),
        # The package whose app class answered: the `framework` answer, served.
        "framework": type(request.app).__module__.partition(".")[0],
        "http": settings.resolved_http,
        "http_version": request.scope["http_version"],
        # As seen after the proxy-headers middleware of the engine.
        "client": request.client.host if request.client else "",
        "scheme": request.url.scheme,
        "python": platform.python_version(),
        "pid": os.getpid(),
    }
