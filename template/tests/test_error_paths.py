"""Error paths on every engine: aborted uploads, a 500, an invalid WebSocket frame.

Each engine is booted once, with the JSON access log and a router that fails (written
into app/routes/ as you would add one, and removed after), its stdout and stderr kept
apart. stdout must hold the access log alone, one line per request, the 499s of the
aborted uploads and the 500 included; stderr the launcher's, the engine's and the
app's lines, with one traceback: the 500's (docs/security.md, "Error paths and logs").
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app import custom
from app.core.framework import (
    APIRouter,
    FastAPI,
    JSONResponse,
    Request,
    StreamingResponse,
    TestClient,
)
from app.core.settings import get_settings
from app.main import create_app
from app.middleware.security_headers import SECURITY_HEADERS
from tests import served
from tests.request_set import handshake, status_line
from tests.server_process import PROJECT_DIR, running_server

ROUTER_FILE = PROJECT_DIR / "app" / "routes" / "error_paths_test_router.py"
ROUTER = '''"""Written by tests/test_error_paths.py while it runs, and removed after."""

from app.core.framework import APIRouter, HTTPException, Request

router = APIRouter(prefix="/error-paths")


@router.post("/upload")
async def upload(request: Request) -> dict[str, int]:
    return {"size": len(await request.body())}


@router.get("/crash")
async def crash() -> None:
    raise RuntimeError("crashed on purpose")


@router.get("/teapot")
async def teapot() -> None:
    raise HTTPException(status_code=418, detail="handled by FastAPI")
'''
ABORTED = 20  # uploads that stop after 1,000 of 1,000,000 announced bytes
# The engine writes its own lines on stderr, next to the launcher's and the app's.
ENGINE_LINE = {"uvicorn": "Application startup complete", "granian": "Started worker-1",
               "gunicorn": "ASGI server listening on", "hypercorn": "Running on http://"}
# `sh` sends the server's stderr to a file of its own; running_server keeps stdout.
STDERR_APART = ["sh", "-c", 'exec "$@" 2>"$ERROR_PATHS_STDERR"', "sh", sys.executable,
                "-m", "cli"]


@dataclass
class Observed:
    engine: str
    stdout: str
    stderr: str
    crash: httpx.Response
    teapot: httpx.Response

    def access_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line]

    def line_of(self, request_id: str) -> list[dict[str, Any]]:
        return [line for line in self.access_lines() if line["request_id"] == request_id]


def abort_upload(url: str, request_id: str) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /error-paths/upload HTTP/1.1\r\nHost: localhost\r\n"
                     b"X-Request-ID: " + request_id.encode() + b"\r\n"
                     b"Content-Type: application/octet-stream\r\n"
                     b"Content-Length: 1000000\r\n\r\n" + b"a" * 1000)
        time.sleep(0.05)  # the route is reading the body when the client leaves


def send_invalid_utf8_text_frame(url: str) -> None:
    with contextlib.closing(handshake(url, {"Host": "localhost"})) as sock:
        assert " 101 " in status_line(sock)
        payload = b"\xff\xfe\xfd"  # not UTF-8, in a text frame (opcode 1), masked by 0
        sock.sendall(bytes([0x81, 0x80 | len(payload)]) + b"\x00\x00\x00\x00" + payload)
        with contextlib.suppress(OSError):
            sock.recv(64)  # the engine's close frame


@contextlib.contextmanager
def router_file() -> Iterator[None]:
    ROUTER_FILE.write_text(ROUTER)
    try:
        yield
    finally:
        ROUTER_FILE.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=served.ENGINES)
def observed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Observed:
    engine = request.param
    stderr = tmp_path_factory.mktemp(engine) / "stderr.log"
    env = {"WEBSERVER_ACCESS_LOG": "json", "WEBSERVER_LOG_LEVEL": "info",
           "ERROR_PATHS_STDERR": str(stderr)}
    with router_file(), running_server(["--engine", engine], env=env,
                                       program=STDERR_APART) as server:
        for number in range(ABORTED):
            abort_upload(server.url, f"aborted-{number}")
        crash = httpx.get(f"{server.url}/error-paths/crash", headers={"X-Request-ID": "crash-1"})
        teapot = httpx.get(f"{server.url}/error-paths/teapot")
        send_invalid_utf8_text_frame(server.url)
        time.sleep(0.5)
        stdout = server.output()
    return Observed(engine, stdout, stderr.read_text(errors="replace"), crash, teapot)


def test_stdout_holds_the_access_log_alone(observed: Observed) -> None:
    lines = observed.access_lines()  # every line is one JSON access line
    assert lines and all(set(line) >= {"status", "path", "request_id"} for line in lines)
    assert ENGINE_LINE[observed.engine] in observed.stderr
    assert "Starting " in observed.stderr  # the launcher's line


def test_an_aborted_upload_is_one_499_line_and_no_traceback(observed: Observed) -> None:
    for number in range(ABORTED):
        assert [(line["method"], line["path"], line["status"])
                for line in observed.line_of(f"aborted-{number}")] == [
            ("POST", "/error-paths/upload", 499)], observed.stdout
    assert "ClientDisconnect" not in observed.stderr
    assert "aborted-" not in observed.stderr


def test_a_500_carries_the_request_id_and_headers_and_logs_one_traceback(
        observed: Observed) -> None:
    crash = observed.crash
    assert crash.status_code == 500
    yours = FastAPI()
    custom.customize(yours)  # your handlers alone: a 500 of yours builds its own body
    if 500 not in yours.exception_handlers and Exception not in yours.exception_handlers:
        assert crash.text == "Internal Server Error"
    assert crash.headers["x-request-id"] == "crash-1"
    for name, value in SECURITY_HEADERS:
        assert crash.headers[name.decode()] == value.decode()
    assert [line["status"] for line in observed.line_of("crash-1")] == [500]
    # One ERROR line naming the request, with the one traceback of the run.
    errors = [line for line in observed.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "crash-1" in errors[0], observed.stderr
    assert observed.stderr.count("Traceback (most recent call last)") == 1
    assert "RuntimeError: crashed on purpose" in observed.stderr


def test_fastapi_exception_handlers_still_answer(observed: Observed) -> None:
    teapot = observed.teapot
    assert teapot.status_code == 418
    assert teapot.json() == {"detail": "handled by FastAPI"}
    assert teapot.headers["x-request-id"]


def test_an_invalid_websocket_frame_is_one_line_at_most(observed: Observed) -> None:
    lines = [line for line in observed.stderr.splitlines() if "UTF-8" in line]
    assert len(lines) <= 1 and not any("ERROR" in line for line in lines), observed.stderr
    # The only traceback is the 500's (test above): none for the frame.


# In-process: what the served checks above do not reach.

def crash_router() -> APIRouter:
    router = APIRouter()

    @router.get("/crash")
    async def crash() -> None:
        raise RuntimeError("crashed on purpose")

    @router.get("/crash-mid-body")
    async def crash_mid_body() -> StreamingResponse:
        async def body() -> Any:
            yield b"first chunk"
            raise RuntimeError("crashed after the response started")

        return StreamingResponse(body())

    return router


@pytest.fixture
def app() -> Iterator[FastAPI]:
    get_settings.cache_clear()
    yield create_app(user_routers=[crash_router()])
    get_settings.cache_clear()


def test_your_handler_for_exception_builds_the_500(app: FastAPI) -> None:
    async def handler(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"error": type(error).__name__}, status_code=500)

    app.add_exception_handler(Exception, handler)
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
        answer = client.get("/crash", headers={"X-Request-ID": "mine"})
    assert (answer.status_code, answer.json()) == (500, {"error": "RuntimeError"})
    assert answer.headers["x-request-id"] == "mine"


def test_a_failure_after_the_response_started_is_left_to_the_engine(app: FastAPI) -> None:
    """No second response can be sent: the exception goes on to the engine, which logs
    it and cuts the connection (the client sees a truncated answer, never a complete
    one)."""
    with TestClient(app, base_url="http://localhost") as client, \
            pytest.raises(RuntimeError, match="after the response started"):
        client.get("/crash-mid-body")
