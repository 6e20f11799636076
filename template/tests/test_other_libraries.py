"""Loops that are not asyncio (trio, under Hypercorn), in every project whatever its
loop: the template's layers have a branch of their own for them (the body and
WebSocket timers, the in-flight gauge, `server_stopping`, the end of streams at a
stop), and a user's code that calls asyncio fails there in a way the docs describe
(docs/engines.md, Hypercorn)."""

from __future__ import annotations

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
from fastapi import APIRouter
from fastapi.testclient import TestClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.core import loops
from tests import request_set
from tests.server_process import PROJECT_DIR, Server, free_port, running_server
from tests.test_metrics import in_flight
from tests.test_restarts import first_event_then_rest, websocket_until_closed

ROWS = [(engine, name) for name, spec in loops.LOOPS.items() if not spec.asyncio
        for engine in spec.engine_values]
SHORT = ["--body-timeout", "1", "--ws-idle-timeout", "1", "--stream-stop-timeout", "1"]
# What the worker says when code at its startup calls asyncio on trio (worker.py).
STARTUP_SENTENCE = "code run at its startup calls asyncio (or a library built on it)"


@pytest.fixture(scope="module", params=ROWS, ids="-".join)
def served(request: pytest.FixtureRequest) -> Iterator[Server]:
    engine, loop = request.param
    with running_server(["--engine", engine, "--loop", loop, *SHORT],
                        env=request_set.OPEN) as server:
        yield server


def test_the_request_set_is_served_on_it(served: Server) -> None:
    detail = httpx.get(f"{served.url}/health/detailed").json()
    assert (detail["loop"], detail["loop_class"]) == ("trio", "trio.run")
    assert request_set.observe(served.url) == request_set.expected(proxy_trusted=True)


def test_a_slow_body_gets_408(served: Server) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /demo/echo HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Length: 100\r\n\r\n0123456789")
        answer = sock.recv(65536)  # the rest of the body never comes
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_an_idle_websocket_is_closed_with_1001(served: Server) -> None:
    url = served.url.replace("http://", "ws://", 1) + "/ws/echo"
    with connect(url, open_timeout=5) as websocket, \
            pytest.raises(ConnectionClosed) as closed:
        websocket.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


@pytest.mark.demo_routes
def test_the_requests_in_flight_are_written(served: Server) -> None:
    slow = threading.Thread(target=httpx.get, args=(f"{served.url}/demo/sleep?ms=3000",),
                            kwargs={"timeout": 10})
    slow.start()
    time.sleep(2.2)  # the gauge is written once a second
    counted = in_flight(served)
    slow.join()
    assert counted == 1.0


@pytest.mark.demo_routes
@pytest.mark.parametrize(("engine", "loop"), ROWS, ids="-".join)
def test_sigterm_ends_streams_and_websockets(engine: str, loop: str) -> None:
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


@pytest.mark.parametrize(("engine", "loop"), ROWS, ids="-".join)
def test_a_lifespan_calling_asyncio_stops_the_worker_with_a_sentence(
        tmp_path: Path, engine: str, loop: str) -> None:
    for package in ("app", "serving"):
        shutil.copytree(PROJECT_DIR / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    custom = tmp_path / "app" / "custom.py"
    custom.write_text(custom.read_text() + LIFESPAN_ON_ASYNCIO)
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--engine", engine, "--loop", loop,
         "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", str(free_port(besides=port))],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.rstrip().splitlines()[-1].endswith(
        "use AnyIO's calls, or the loop auto, asyncio or uvloop (docs/engines.md, Hypercorn)."
    ), result.stderr[-2000:]
    assert STARTUP_SENTENCE in result.stderr
