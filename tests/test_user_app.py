"""A user's whole app keeps the template's promises, on every engine.

A fresh render with the app in tests/user_app/ added the way the project's docs say
(app/custom.py and a router in app/routes/): a tutorial BaseHTTPMiddleware, CORS and
GZip in MIDDLEWARE, a lifespan holding an aiosqlite connection, custom 422 and 500
handlers, an upload, SSE, a WebSocket behind a token dependency. Served with two
workers behind a trusted proxy's X-Forwarded-Prefix, each engine must give the
template's answers unchanged (status, body, CORS header, request id, one log line),
run the lifespan's startup and shutdown in each worker, and cap WebSocket messages.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from extensions.matrix import loops
from tests.conftest import DEFAULT_PYTHON, environment_for, server_process

USER_APP = Path(__file__).parent / "user_app"
ORIGIN = "https://front.example"
BODY_TIMEOUT = 2
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def user_project(copie_session) -> Path:
    result = copie_session.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    add_user_app(project)
    return project


def add_user_app(project: Path) -> None:
    shutil.copy(USER_APP / "custom.py", project / "app/custom.py")
    shutil.copy(USER_APP / "routes/shop.py", project / "app/routes/shop.py")
    shutil.copy(USER_APP / "tests/test_shop.py", project / "tests/test_shop.py")


def raw_exchange(port: int, request: bytes, timeout: float = 10) -> tuple[bytes, float]:
    """Send `request` while reading the answer until the server closes; (the answer,
    seconds). A server that answers before the body's end closes with the rest unread:
    sending stops there, and what was read by then is the answer."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        def send() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(request)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
        took = time.monotonic() - started
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sender.join(timeout)
    return answer, took


def head(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    lines, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = lines.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def chunked_upload(size: int) -> bytes:
    chunk = b"x" * 0x8000
    body = b"".join(b"8000\r\n" + chunk + b"\r\n" for _ in range(size // len(chunk)))
    return (b"POST /shop/echo HTTP/1.1\r\nHost: localhost\r\nOrigin: " + ORIGIN.encode()
            + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n")


def stalled_upload() -> bytes:
    return (b"POST /shop/echo HTTP/1.1\r\nHost: localhost\r\nOrigin: " + ORIGIN.encode()
            + b"\r\nContent-Length: 100\r\n\r\nonly a part")


def refused_handshake(url: str, **options: object) -> httpx.Response | object:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=5, **options)
    return refused.value.response


SHELL_SETTINGS = {"WEBSERVER_SECURITY_HEADERS": "false"}  # exported in a developer's shell


def test_make_test_passes_with_the_users_app(user_project: Path) -> None:
    """What `make test` runs (pytest's default selection), in a project whose MIDDLEWARE
    holds a tutorial BaseHTTPMiddleware and Middleware(CORSMiddleware, ...) entries and
    whose lifespan opens aiosqlite: the tests check the template's promises through the
    user's app on the engines it serves, not fail on it (0.22.0 wrapped a Middleware
    entry in Middleware again; 0.22.2 booted it on trio, and read the developer's .env)."""
    interpreter, python = environment_for(DEFAULT_PYTHON, user_project / "pyproject.toml",
                                          ("aiosqlite",))
    # The developer's own settings, in .env and in the shell: the tests read neither
    # (0.22.2 found two fused layers with CORS set in .env).
    env_file = user_project / ".env"
    kept = env_file.read_text() if env_file.exists() else None
    env_file.write_text((kept or "") + "\nWEBSERVER_CORS_ORIGINS=https://app.example.com\n")
    try:
        tests = subprocess.run(
            interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "-rA"], user_project, env=SHELL_SETTINGS),
            cwd=user_project, env={**os.environ, **SHELL_SETTINGS}, capture_output=True,
            text=True, timeout=600)
    finally:
        if kept is None:
            env_file.unlink()
        else:
            env_file.write_text(kept)
    assert tests.returncode == 0, tests.stdout[-4000:]
    assert "PASSED tests/test_shop.py::test_an_item_comes_from_the_database" in tests.stdout


def test_a_project_serving_trio_fails_once_with_a_sentence(copie_session) -> None:
    """The user's aiosqlite lifespan cannot run on trio: in a project that serves trio,
    one test fails, naming the library and how to stop serving trio; the rest of that
    loop's tests are skipped."""
    result = copie_session.copy(extra_answers={
        "served_loops": ["asyncio", "uvloop", "rloop", "zuvloop", "trio"]})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    add_user_app(project)
    interpreter, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml",
                                          ("aiosqlite",))
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-rfs", "tests/test_other_libraries.py"], project),
        cwd=project, capture_output=True, text=True, timeout=300)
    summary = tests.stdout.strip().splitlines()[-1]
    assert tests.returncode == 1 and re.match(r"=* ?1 failed, \d+ passed, \d+ skipped", summary), \
        tests.stdout[-4000:]
    assert ("code run at its startup (aiosqlite, from app/custom.py line" in tests.stdout
            and "`copier update --trust --defaults --data 'served_loops=[asyncio, uvloop, "
                "rloop, zuvloop]'`" in tests.stdout), tests.stdout[-4000:]
    assert "FAILED tests/test_other_libraries.py::test_your_app_starts_on_it[hypercorn-trio]" \
        in tests.stdout


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_the_user_app_keeps_every_promise(user_project: Path, engine: str,
                                          tmp_path: Path) -> None:
    interpreter, python = environment_for(DEFAULT_PYTHON, user_project / "pyproject.toml",
                                          ("aiosqlite",))
    lifespan_log = tmp_path / "lifespan.log"
    env = {"WEBSERVER_WORKERS": "2", "WEBSERVER_BODY_TIMEOUT": str(BODY_TIMEOUT),
           "APP_LIFESPAN_LOG": str(lifespan_log), "APP_DATABASE": str(tmp_path / "shop.db")}
    runner = interpreter.command([str(python)], user_project)
    with server_process.running_server(["--engine", engine], python=runner, env=env,
                                       cwd=user_project) as server:
        port = int(server.url.rsplit(":", 1)[1])
        cors = {"Origin": ORIGIN}

        # A chunked upload over the 1 MiB limit, read by the route, under the tutorial
        # BaseHTTPMiddleware: the template's 413, with CORS and the request id.
        status, headers, body = head(raw_exchange(port, chunked_upload(MiB + MiB // 4))[0])
        assert (status, body) == (413, b'{"detail":"Content Too Large"}')
        assert headers["access-control-allow-origin"] == ORIGIN
        assert headers["x-request-id"] and "x-process-time" in headers

        # A body that stops coming: 408 at the timeout, not a 500 later.
        answer, took = raw_exchange(port, stalled_upload())
        status, headers, body = head(answer)
        assert (status, body) == (408, b'{"detail":"Request Timeout"}')
        assert headers["access-control-allow-origin"] == ORIGIN
        assert BODY_TIMEOUT - 0.2 <= took < BODY_TIMEOUT + 3

        # 101 header lines: granian and gunicorn refuse them themselves, before the app
        # (so without CORS); under uvicorn the app's 431 gets it.
        many = {f"x-h{number}": "1" for number in range(101)}
        too_many = httpx.get(f"{server.url}/shop/items/1", headers={**cors, **many})
        assert too_many.status_code == 431
        if engine == "uvicorn":
            assert too_many.json() == {"detail": "Request Header Fields Too Large"}
            assert too_many.headers["access-control-allow-origin"] == ORIGIN
            assert too_many.headers["x-service"] == "shop"  # the pure ASGI one

        announced = httpx.post(f"{server.url}/shop/echo", content=b"x" * (2 * MiB), headers=cors)
        assert announced.status_code == 413
        assert announced.headers["access-control-allow-origin"] == ORIGIN

        crashed = httpx.get(f"{server.url}/shop/boom", headers=cors)
        assert (crashed.status_code, crashed.json()) == (500, {"problem": "internal"})
        assert crashed.headers["access-control-allow-origin"] == ORIGIN
        request_id = crashed.headers["x-request-id"]

        # A Host not allowed is refused before any middleware of yours sees it (so
        # your CORS middleware does not either; WEBSERVER_CORS_ORIGINS would).
        other_host = httpx.get(f"{server.url}/shop/items/1",
                               headers={**cors, "Host": "evil.example"})
        assert (other_host.status_code, other_host.text) == (400, "Invalid host header")
        assert not {"x-service", "x-process-time"} & set(other_host.headers)
        assert other_host.headers["x-request-id"]
        for hosts in ((b"localhost", b"evil.example"), (b"evil.example", b"localhost")):
            two_hosts, _ = raw_exchange(port, b"GET /shop/items/1 HTTP/1.1\r\nHost: %s\r\n"
                                        b"Host: %s\r\nConnection: close\r\n\r\n" % hosts)
            assert head(two_hosts)[0] == 400, hosts

        invalid = httpx.get(f"{server.url}/shop/items/x")
        assert (invalid.status_code, invalid.json()["problem"]) == (422, "invalid")

        # Behind a proxy serving the app under /api (127.0.0.1 is a trusted proxy).
        item = httpx.get(f"{server.url}/shop/items/1", headers={
            "X-Forwarded-Prefix": "/api", "X-Forwarded-Proto": "https"}).json()
        assert item["name"] == "kettle"  # from the lifespan's database
        assert item["url"] == f"https://127.0.0.1:{port}/api/shop/items/1"

        upload = httpx.post(f"{server.url}/shop/upload", files={"file": ("a.txt", b"hello")})
        assert upload.json() == {"name": "a.txt", "size": 5}
        events = httpx.get(f"{server.url}/shop/events?count=3")
        assert events.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        zipped = httpx.get(f"{server.url}/shop/catalog")
        assert zipped.headers.get("content-encoding") == "gzip"

        ws_url = server.url.replace("http://", "ws://") + "/shop/ws"
        for refusal in (refused_handshake(f"{ws_url}?token=bad"),
                        refused_handshake(f"{ws_url}?token=letmein",
                                          additional_headers={"Origin": "https://evil.example"})):
            assert (refusal.status_code, refusal.body) == (403, b"")
            assert not {"upgrade", "sec-websocket-accept"} & set(refusal.headers)
        with connect(f"{ws_url}?token=letmein", open_timeout=5, max_size=None) as ws:
            ws.send("hello")
            assert ws.recv(timeout=5) == "hello"
            with pytest.raises(ConnectionClosed) as closed:  # gunicorn: while it is sent
                ws.send("x" * (4 * MiB))
                ws.recv(timeout=10)
        # Closed with 1009 and never echoed. gunicorn closes while the client is still
        # sending, and its close frame is then sometimes lost in the reset.
        received = closed.value.rcvd
        assert (received.code == 1009) if received else engine == "gunicorn", closed.value
        time.sleep(0.3)  # the last lines reach the log
        log = server.output()

    # One ERROR line, with its traceback, for the user's bug; nothing for the refusals.
    assert log.count("Traceback") == 1, log[-6000:]
    assert f"GET '/shop/boom' failed (request id {request_id})" in log
    assert "ExceptionGroup" not in log and "without completing handshake" not in log, log[-6000:]
    events = lifespan_log.read_text().split("\n")
    started = {line.split()[1] for line in events if line.startswith("startup")}
    stopped = {line.split()[1] for line in events if line.startswith("shutdown")}
    assert len(started) == 2 and stopped == started, events
