"""Loops that are not asyncio (trio, under Hypercorn), in a project that serves one
(its answer served_loops): the template's layers have a branch of their own for them
(the body and WebSocket timers, the in-flight gauge, `server_stopping`, the end of
streams at a stop), and a user's code that calls asyncio fails there with a sentence
(docs/engines.md, Hypercorn).

Your app is booted once per such loop: when it cannot start there, one test fails with
the worker's sentence (the library, and how to stop serving the loop), and the others
on that loop are skipped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.core import loops
from app.core.answers import ANSWERS
from app.core.framework import APIRouter, TestClient
from tests import request_set, served
from tests.server_process import PROJECT_DIR, BootError, Server, free_port, running_server
from tests.test_metrics import in_flight
from tests.test_restarts import first_event_then_rest, websocket_until_closed

ROWS = [(engine, loop) for engine, loop in served.PAIRS if not loops.LOOPS[loop].asyncio]
pytestmark = pytest.mark.skipif(
    not ROWS, reason="the project serves asyncio loops only (its answer served_loops)")
SHORT = ["--body-timeout", "1", "--ws-idle-timeout", "1", "--stream-stop-timeout", "1"]
# What the worker says when code at its startup calls asyncio on trio (worker.py).
STARTUP_SENTENCE = "calls asyncio, which does not run on trio"
NOT_STARTED = "your app does not start on {row}: test_your_app_starts_on_it[{row}] says why"
NOT_STARTED_HERE: set[tuple[str, str]] = set()


@pytest.fixture(scope="module", params=ROWS, ids="-".join)
def booted(request: pytest.FixtureRequest) -> Iterator[Server | BootError]:
    engine, loop = request.param
    with contextlib.ExitStack() as stack:
        try:
            server: Server | BootError = stack.enter_context(running_server(
                ["--engine", engine, "--loop", loop, *SHORT], env=request_set.OPEN))
        except BootError as error:
            NOT_STARTED_HERE.add((engine, loop))
            server = error
        yield server


def test_your_app_starts_on_it(booted: Server | BootError) -> None:
    if isinstance(booted, BootError):
        lines = [line for line in str(booted).splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if STARTUP_SENTENCE in line), "")
        pytest.fail(said or "\n".join(lines[-30:]), pytrace=False)


@pytest.fixture
def server_on_it(booted: Server | BootError, request: pytest.FixtureRequest) -> Server:
    if isinstance(booted, BootError):
        pytest.skip(NOT_STARTED.format(row=request.node.callspec.id))
    return booted


def starts(engine: str, loop: str) -> None:
    """Skip a test that boots its own server where the module's boot failed."""
    if (engine, loop) in NOT_STARTED_HERE:
        pytest.skip(NOT_STARTED.format(row=f"{engine}-{loop}"))


def test_the_request_set_is_served_on_it(server_on_it: Server) -> None:
    detail = httpx.get(f"{server_on_it.url}/health/detailed").json()
    assert (detail["loop"], detail["loop_class"]) == ("trio", "trio.run")
    assert request_set.observe(server_on_it.url) == request_set.expected(proxy_trusted=True)


def test_a_slow_body_gets_408(server_on_it: Server) -> None:
    port = int(server_on_it.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /demo/echo HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Length: 100\r\n\r\n0123456789")
        answer = sock.recv(65536)  # the rest of the body never comes
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_an_idle_websocket_is_closed_with_1001(server_on_it: Server) -> None:
    url = server_on_it.url.replace("http://", "ws://", 1) + "/ws/echo"
    with connect(url, open_timeout=5) as websocket, \
            pytest.raises(ConnectionClosed) as closed:
        websocket.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


@pytest.mark.demo_routes
def test_the_requests_in_flight_are_written(server_on_it: Server) -> None:
    slow = threading.Thread(target=httpx.get, args=(f"{server_on_it.url}/demo/sleep?ms=3000",),
                            kwargs={"timeout": 10})
    slow.start()
    time.sleep(2.2)  # the gauge is written once a second
    counted = in_flight(server_on_it)
    slow.join()
    assert counted == 1.0


@pytest.mark.demo_routes
@pytest.mark.parametrize(("engine", "loop"), ROWS)
def test_sigterm_ends_streams_and_websockets(engine: str, loop: str) -> None:
    starts(engine, loop)
    seen: list[str] = []
    codes: list[int | None] = []
    with running_server(["--engine", engine, "--loop", loop]) as server:
        started = [threading.Event(), threading.Event()]
        threads = [threading.Thread(target=first_event_then_rest, daemon=True,
                                    args=(server, "/demo/events?every=0.2", seen, started[0])),
                   threading.Thread(target=websocket_until_closed, daemon=True,
                                    args=(server, codes, started[1]))]
        for thread in threads:
            thread.start()
        assert all(event.wait(10) for event in started), seen
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=20)
        for thread in threads:
            thread.join(timeout=5)
        output = server.output()
    assert seen[-1] == "END" and "event: bye" in seen, seen[-3:]  # server_stopping.wait
    assert codes == [1012], (codes, output[-3000:])  # ended at the stop (open_streams.py)
    assert server.process.returncode == 0
    assert "Traceback" not in output and "ERROR" not in output, output[-3000:]


def on_trio(router: APIRouter) -> TestClient:
    """The app with `router` and the tutorial's timing middleware (a Starlette
    BaseHTTPMiddleware) added, called in-process on trio (AnyIO's trio backend)."""
    from app.main import create_app

    app = create_app()
    app.include_router(router)

    @app.middleware("http")
    async def add_process_time_header(request, call_next):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        response = await call_next(request)
        response.headers["X-Process-Time"] = str(time.perf_counter() - started)
        return response

    return TestClient(app, backend="trio", raise_server_exceptions=False)


def test_a_route_calling_asyncio_gets_500_and_one_on_anyio_200() -> None:
    for engine, loop in NOT_STARTED_HERE:  # in-process, your lifespan included
        starts(engine, loop)
    import asyncio

    import anyio

    router = APIRouter()

    @router.get("/asyncio")
    async def on_asyncio() -> dict[str, bool]:
        await asyncio.sleep(0.01)
        return {"slept": True}

    @router.get("/anyio")
    async def on_anyio() -> dict[str, int]:
        results: list[int] = []

        async def one(value: int) -> None:
            await anyio.sleep(0.01)
            results.append(value)

        async with anyio.create_task_group() as group:
            for value in range(3):
                group.start_soon(one, value)
        results.append(await anyio.to_thread.run_sync(lambda: 3))
        return {"done": sorted(results) == [0, 1, 2, 3]}

    @router.get("/plain")
    def plain() -> dict[str, bool]:  # run in AnyIO's threads
        time.sleep(0.01)
        return {"slept": True}

    with on_trio(router) as client:
        failed = client.get("/asyncio")
        answers = [client.get(path) for path in ("/anyio", "/plain")]
    assert failed.status_code == 500
    assert [answer.json() for answer in answers] == [{"done": True}, {"slept": True}]
    assert all("X-Process-Time" in answer.headers for answer in (failed, *answers))


LIFESPAN_ON_ASYNCIO = '''

import asyncio as _asyncio


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
    await _asyncio.sleep(0.01)
    yield {}
'''


@pytest.mark.parametrize(("engine", "loop"), ROWS)
def test_a_lifespan_calling_asyncio_stops_the_worker_with_a_sentence(
        tmp_path: Path, engine: str, loop: str) -> None:
    for package in ("app", "serving", "cli"):
        shutil.copytree(PROJECT_DIR / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    custom = tmp_path / "app" / "custom.py"
    custom.write_text(custom.read_text() + LIFESPAN_ON_ASYNCIO)
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--engine", engine, "--loop", loop,
         "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", str(free_port(besides=port))],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path),
                           "WEBSERVER_SERVED_LOOPS": "uvloop,trio"},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = custom.read_text().splitlines()
    calling = next(number for number, line in enumerate(lines, 1) if "_asyncio.sleep" in line)
    last = result.stderr.rstrip().splitlines()[-1]
    assert f"code run at its startup (app/custom.py line {calling}) {STARTUP_SENTENCE}" in last
    # A project whose answered loop is trio is also told to answer another.
    answer = " --data loop_policy=auto" if ANSWERS["loop_policy"] == "trio" else ""
    assert last.endswith(f"--data 'served_loops=[uvloop]'{answer}` (docs/engines.md, "
                         "Hypercorn)."), result.stderr[-2000:]
