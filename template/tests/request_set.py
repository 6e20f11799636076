"""The requests whose answers must be the same on every engine and loop."""

from __future__ import annotations

from typing import Any

import httpx
from websockets.sync.client import connect

from app.main import STATIC_DIR
from app.middleware.security_headers import SECURITY_HEADERS

STATIC_FILE = "hello.txt"
FORWARDED = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}
# A TLS-terminating proxy may send the scheme alone: each header counts on its own.
PROTO_ONLY = {"X-Forwarded-Proto": "https"}
ECHO = "echo through the engine"
ECHO_BYTES = b"\x00\xffbinary frame"


def observe(base_url: str) -> dict[str, Any]:
    """Static file through the middleware, WebSocket echo, forwarded headers."""
    static = httpx.get(f"{base_url}/static/{STATIC_FILE}")
    detail = httpx.get(f"{base_url}/health/detailed", headers=FORWARDED).json()
    proto_only = httpx.get(f"{base_url}/health/detailed", headers=PROTO_ONLY).json()
    redirect = httpx.get(f"{base_url}/health", headers=PROTO_ONLY)  # to /health/
    # FastAPI's documentation routes, and the 405 a wrong method gets there.
    docs = [httpx.request(method, f"{base_url}{path}").status_code
            for method, path in (("GET", "/docs"), ("GET", "/redoc"),
                                 ("GET", "/docs/oauth2-redirect"), ("POST", "/docs"))]
    schema_paths = sorted(httpx.get(f"{base_url}/openapi.json").json()["paths"])
    ws_url = base_url.replace("http://", "ws://", 1) + "/ws/echo"
    with connect(ws_url, open_timeout=10, close_timeout=5) as websocket:
        websocket.send(ECHO)
        echoed = websocket.recv(timeout=10)
        websocket.send(ECHO_BYTES)
        echoed_bytes = websocket.recv(timeout=10)
    return {
        "static_status": static.status_code,
        "static_body": static.content,
        "security_headers": {
            name.decode(): static.headers.get(name.decode()) for name, _ in SECURITY_HEADERS
        },
        "request_id": bool(static.headers.get("x-request-id")),
        "server_timing": static.headers.get("server-timing", "").startswith("app;dur="),
        "echo": echoed,
        "echo_bytes": echoed_bytes,
        "client": detail["client"],
        "scheme": detail["scheme"],
        "proto_only": (proto_only["client"], proto_only["scheme"]),
        "redirect_scheme": redirect.headers.get("location", "").partition(":")[0],
        "docs": docs,
        "schema_has_health": "/health/" in schema_paths,
    }


def expected(*, proxy_trusted: bool) -> dict[str, Any]:
    return {
        "static_status": 200,
        "static_body": (STATIC_DIR / STATIC_FILE).read_bytes(),
        "security_headers": {name.decode(): value.decode() for name, value in SECURITY_HEADERS},
        "request_id": True,
        "server_timing": True,
        "echo": ECHO,
        "echo_bytes": ECHO_BYTES,
        "client": FORWARDED["X-Forwarded-For"] if proxy_trusted else "127.0.0.1",
        "scheme": FORWARDED["X-Forwarded-Proto"] if proxy_trusted else "http",
        "proto_only": ("127.0.0.1", "https" if proxy_trusted else "http"),
        "redirect_scheme": "https" if proxy_trusted else "http",
        "docs": [200, 200, 200, 405],
        "schema_has_health": True,
    }

