"""Your additions to the app. Copier renders this file once and never changes it again
(`_skip_if_exists`), so what you write here survives every `copier update`.

- Routers: a module in `app/routes/` that defines `router` is included; nothing to list.
- Middleware: a pure ASGI class in its own module under `app/middleware/` (where
  `tests/test_middleware.py` checks it passes granian's pathsend), listed in
  MIDDLEWARE below; yours run inside the template's own, outermost first.
- Settings: fields on AppSettings, read from the environment and `.env` with the
  prefix APP_ (WEBSERVER_ is the server's, and an unknown WEBSERVER_ name is refused).
- Anything else on the app (exception handlers, state): `customize`.
"""

from __future__ import annotations

from functools import lru_cache

from fastapi import FastAPI
from pydantic_settings import BaseSettings, SettingsConfigDict

MIDDLEWARE: tuple[type, ...] = ()


class AppSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")


@lru_cache
def get_app_settings() -> AppSettings:
    return AppSettings()


def customize(app: FastAPI) -> None:
    """Called last by `create_app`, with every route and middleware in place."""
