"""The requests whose answers must be the same on every engine and loop."""

from __future__ import annotations

import base64
import os
import socket
from typing import Any

import httpx
from websockets.sync.client import connect

from app.core import loops
from app.core.settings import get_settings
from app.main import STATIC_DIR
from app.middleware.security_headers import SECURITY_HEADERS

STATIC_FILE = "hello.txt"
FORWARDED = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}
# A TLS-terminating proxy may send the scheme alone: each header counts on its own.
PROTO_ONLY = {"X-Forwarded-Proto": "https"}
RANGE = "bytes=2-6"  # a part of the static file: 206, through the middleware too
ECHO = "echo through the engine"
ECHO_BYTES = b"\x00\xffbinary frame"
# observe() reads the API docs and the full health report, both off by default
# (docs/security.md), and Server-Timing, off by default: the servers it observes run
# with these.
OPEN = {"WEBSERVER_API_DOCS": "true", "WEBSERVER_HEALTH_DETAIL": "full",
        "WEBSERVER_SERVER_TIMING": "true"}


def loop_for(engine: str) -> str:
    """The project's loop policy where this engine accepts it here, else auto: a
    project's own tests run each engine on the project's loop (WEBSERVER_LOOP)."""
    policy = get_settings().loop
    return policy if loops.refusal(engine, policy, loops.python_version()) is None else loops.AUTO


def observe(base_url: str) -> dict[str, Any]:
    """Static file (whole and a range) through the middleware, WebSocket echo,
    forwarded headers."""
    static = httpx.get(f"{base_url}/static/{STATIC_FILE}")
    part = httpx.get(f"{base_url}/static/{STATIC_FILE}", headers={"Range": RANGE})
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
        "range": (part.status_code, part.headers.get("content-range"), part.content),
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
    size = (STATIC_DIR / STATIC_FILE).stat().st_size
    return {
        "static_status": 200,
        "static_body": (STATIC_DIR / STATIC_FILE).read_bytes(),
        "range": (206, f"bytes 2-6/{size}", (STATIC_DIR / STATIC_FILE).read_bytes()[2:7]),
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


def handshake(base_url: str, headers: dict[str, str], path: str = "/ws/echo") -> socket.socket:
    """A WebSocket handshake with exactly these headers (a browser's Origin, a forged
    Host), on a raw socket: the caller reads the answer, and may go on as the client."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", *(f"{name}: {value}" for name, value in headers.items()),
             "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
             "Sec-WebSocket-Version: 13"]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    return sock


def status_line(sock: socket.socket) -> str:
    """The first line of the answer: `HTTP/1.1 101 Switching Protocols`, or a refusal."""
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer.split(b"\r\n", 1)[0].decode("latin-1")
