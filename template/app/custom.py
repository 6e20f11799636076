"""Your additions to the app. Copier renders this file once and never changes it again
(`_skip_if_exists`), so what you write here survives every `copier update`.

- Routers: a module in `app/routes/` that defines `router` is included; nothing to list.
- Middleware: listed in MIDDLEWARE below, outermost first: a class (pure ASGI, or a
  Starlette BaseHTTPMiddleware), or `Middleware(CORSMiddleware, allow_origins=[...])`
  as Starlette's docs write it. Yours run after the Host check and outside the
  template's body limits and 500s, so those answers pass through them
  (app/middleware/__init__.py). For CORS alone, WEBSERVER_CORS_ORIGINS is enough.
- Lifespan: `lifespan` below runs in every worker of every engine; open pools before
  its `yield`, close them after. What it yields is `request.state` in each request.
- Body limits of some routes (an upload route): BODY_LIMITS below, instead of raising
  WEBSERVER_MAX_BODY_SIZE for every route.
- Settings: fields on AppSettings, read from the environment and `.env` with the
  prefix APP_ (WEBSERVER_ is the server's). A bad value stops `serve` with a sentence;
  an APP_ name close to one of yours is refused as a likely typo.
- Anything else on the app (exception handlers, state): `customize`. Middleware goes in
  MIDDLEWARE, not `app.add_middleware` there: that one would stand before the probes
  and the proxy headers (app/main.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache

from fastapi import FastAPI
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.body_limits import BodyLimit

MIDDLEWARE: tuple[object, ...] = ()

# e.g. (BodyLimit(path="/uploads/", max_size=100 * 1024 * 1024, timeout=600),)
BODY_LIMITS: tuple[BodyLimit, ...] = ()


class AppSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")


@lru_cache
def get_app_settings() -> AppSettings:
    return AppSettings()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
    yield {}


def customize(app: FastAPI) -> None:
    """Called last by `create_app`, with every route and middleware in place."""
