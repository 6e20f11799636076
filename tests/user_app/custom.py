"""A user's app/custom.py, written the way the FastAPI and Starlette docs show it.

Test data for tests/test_user_app.py: a tutorial BaseHTTPMiddleware, CORS, GZip and
a pure ASGI middleware in MIDDLEWARE, a lifespan with a real database (aiosqlite), a
setting of the user's own, and custom 422 and 500 handlers.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache

import aiosqlite
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware


class ProcessTimeMiddleware(BaseHTTPMiddleware):
    """The middleware of FastAPI's tutorial (X-Process-Time)."""

    async def dispatch(self, request: Request, call_next):
        start = time.perf_counter()
        response = await call_next(request)
        response.headers["X-Process-Time"] = str(time.perf_counter() - start)
        return response


class ServiceHeaderMiddleware:
    """A pure ASGI middleware, as Starlette's docs write one."""

    def __init__(self, app, name: str = "shop"):
        self.app = app
        self.name = name.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-service", self.name))
            await send(message)

        await self.app(scope, receive, send_with_header)


MIDDLEWARE = (
    Middleware(CORSMiddleware, allow_origins=["https://front.example"],
               allow_methods=["*"], allow_headers=["*"]),
    ProcessTimeMiddleware,
    Middleware(GZipMiddleware, minimum_size=500),
    Middleware(ServiceHeaderMiddleware, name="shop"),
)


class AppSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")

    page_size: int = 20
    database: str = "shop.sqlite3"
    lifespan_log: str = ""  # where the test reads each worker's startup and shutdown


@lru_cache
def get_app_settings() -> AppSettings:
    return AppSettings()


def note(event: str) -> None:
    log = get_app_settings().lifespan_log
    if log:
        with open(log, "a") as sink:
            sink.write(f"{event} {os.getpid()}\n")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
    async with aiosqlite.connect(get_app_settings().database) as db:
        await db.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT)")
        await db.execute("INSERT OR REPLACE INTO items VALUES (1, 'kettle')")
        await db.commit()
        note("startup")
        yield {"db": db}
        note("shutdown")


def customize(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"problem": "invalid", "errors": len(error.errors())},
                            status_code=422)

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"problem": "internal"}, status_code=500)
