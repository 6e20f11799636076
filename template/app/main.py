"""The FastAPI application factory (engines import it as `app.main:create_app`)."""

from __future__ import annotations

from fastapi import FastAPI

from app.api import health
from app.core.config import PROJECT_NAME


def create_app() -> FastAPI:
    app = FastAPI(title=PROJECT_NAME)
    app.include_router(health.router)
    return app
