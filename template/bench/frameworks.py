"""The framework rungs of `bench app --ladder`: bare FastAPI and bare notslowapi, each set
up as the app is (docs off, FastAPI's telemetry off) on the same route, so the ladder
says what the framework itself costs. The other framework is measured when installed."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Any

from app.core.framework import FRAMEWORK
from app.core.loops import FRAMEWORKS
from app.core.settings import get_settings

NO_DOCS = {"openapi_url": None, "docs_url": None, "redoc_url": None}


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def missing_note(package: str) -> str:
    return (f"bare {package}: not installed here; `uv pip install {package}` adds its rung "
            f"(the project does not need it)")


def options(package: str) -> dict[str, object]:
    """What create_app sets up (app.main.fastapi_options), for `package`'s FastAPI."""
    fastapi = importlib.import_module(package).FastAPI
    telemetry = "telemetry" in inspect.signature(fastapi.__init__).parameters
    return {**({} if get_settings().api_docs else NO_DOCS),
            **({"telemetry": {"tracing": False, "metrics": False, "logs": False}}
               if telemetry else {})}


def health_router(package: str) -> Any:
    framework = importlib.import_module(package)
    router = framework.APIRouter(prefix="/health", tags=["health"])

    @router.get("/")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return router


def bare_app(package: str, path: str, user_like: bool) -> Any | None:
    """`package`'s FastAPI serving the case's route, or None for a route of yours (whose
    router is built with the project's framework only)."""
    from bench import user_like as user_like_route

    if user_like:
        router = user_like_route.build_router(package)
    elif path == "/health/":
        router = health_router(package)
    else:
        return None
    app = importlib.import_module(package).FastAPI(**options(package))
    app.include_router(router)
    return app


def packages() -> tuple[str, ...]:
    """The frameworks measured: the project's, then the others installed here."""
    return (FRAMEWORK, *(name for name in FRAMEWORKS if name != FRAMEWORK and installed(name)))


def missing() -> list[str]:
    return [missing_note(name) for name in FRAMEWORKS if not installed(name)]
