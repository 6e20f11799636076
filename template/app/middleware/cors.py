"""CORS from WEBSERVER_CORS_ORIGINS, on every answer the service gives.

Starlette's CORSMiddleware, placed by create_app outside the template's refusals and
500s and outside your middleware: a browser calling from an allowed origin reads a
413, a 408 or a 500 as that status, with its request id, instead of a CORS failure.
Credentials (cookies, Authorization) are allowed for listed origins, never for `*`.
"""

from __future__ import annotations

from app.core.framework import CORSMiddleware, Middleware
from app.core.settings import get_settings

EXPOSED = ["X-Request-ID"]  # so the page's script can quote it in a bug report


def cors_layer() -> tuple[Middleware, ...]:
    origins = get_settings().cors_origins
    if not origins:
        return ()
    listed = origins.split(",")
    return (Middleware(CORSMiddleware, allow_origins=listed, allow_credentials=listed != ["*"],
                       allow_methods=["*"], allow_headers=["*"], expose_headers=EXPOSED),)
