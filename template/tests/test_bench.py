"""`bench engines`: every driver really run against a booted server, and what is counted.

Marked `bench` (`pytest -m bench`). No timed assertions: rates are machine-dependent; the tests
check what is counted and reported, not how fast.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from bench import drivers, harness
from bench.http1 import ResponseReader
from bench.model import Config
from bench.route import Route, RouteError
from bench.verdict import summarize, verdict
from cli.main import cli
from tests import served
from tests.server_process import PROJECT_DIR, free_port, running_server

pytestmark = pytest.mark.bench
DRIVERS = [pytest.param(d, id=d.name, marks=pytest.mark.skipif(
    not d.available(), reason=f"{d.binary} is not installed (apt-get install it)"))
    for d in drivers.ALL.values()]


@pytest.fixture(scope="module")
def server_url():
    served.require("granian")
    with running_server(["--engine", "granian", "--loop", "auto"]) as server:
        yield server.url


@pytest.mark.parametrize("driver", DRIVERS)
def test_driver_runs_and_its_output_is_read(driver: drivers.Driver, server_url: str) -> None:
    result = harness.drive(driver, server_url, Route("/health/"), 8, 1.0, None)
    assert result.driver == driver.name
    assert result.requests > 0 and result.seconds > 0
    assert result.failed == 0 and result.non_2xx == 0
    if driver.name == "h2load":
        assert result.mean_ms and result.p50_ms is None  # h2load has no percentiles
    elif driver.name == "ab":
        # Whole milliseconds: a fast machine's median reads 0.
        assert result.mean_ms
        assert 0 <= result.p50_ms <= result.p95_ms <= result.p99_ms  # type: ignore[operator]
    else:
        assert 0 < result.p50_ms <= result.p95_ms <= result.p99_ms  # type: ignore[operator]


@pytest.mark.skipif(not drivers.ALL["h2load"].available(), reason="h2load is not installed")
def test_h2load_output_of_a_run_under_a_second_is_read(server_url: str) -> None:
    """A run that ends within a second gives its length in ms: a one-second run on a
    fast machine (998.72ms) was refused as printing no summary."""
    done = subprocess.run(["h2load", "--h1", "-t1", "-c2", "-n8", f"{server_url}/health/"],
                          capture_output=True, text=True, timeout=30, check=True)
    assert re.search(r"finished in [\d.]+(us|ms),", done.stdout), done.stdout
    result = drivers.ALL["h2load"].parse(done.stdout)
    assert (result.requests, result.failed, result.non_2xx) == (8, 0, 0)
    assert 0 < result.seconds < 1, (result.seconds, done.stdout)


@pytest.mark.parametrize("driver", DRIVERS)
def test_post_with_a_payload(driver: drivers.Driver, server_url: str) -> None:
    route = Route("/demo/echo", method="POST", body=b'{"x": 1}',
                  headers=(("Content-Type", "application/json"),))
    if not driver.can_send(route):
        pytest.skip(f"{driver.name} cannot send this")
    result = harness.drive(driver, server_url, route, 4, 1.0, None)
    assert result.requests > 0 and result.non_2xx == 0 and result.failed == 0


def test_route_templating(server_url: str) -> None:
    route = Route("/demo/items/{item_id}", {"item_id": "42"})
    assert route.path == "/demo/items/42"
    result = harness.drive(drivers.Python(), server_url, route, 2, 1.0, None)
    assert result.requests > 0 and result.non_2xx == 0
    with pytest.raises(RouteError, match="needs --path-param for item_id"):
        _ = Route("/demo/items/{item_id}").path
    with pytest.raises(RouteError, match="not in the path"):
        _ = Route("/health/", {"item_id": "1"}).path


def test_a_method_a_driver_cannot_send_moves_to_the_next() -> None:
    put = Route("/demo/echo", method="PUT", body=b"x")
    assert not drivers.H2load().can_send(put)
    assert drivers.Wrk().can_send(put) and drivers.Python().can_send(put)
    # An order whose first driver cannot send PUT, whatever is installed here.
    chosen, skipped = drivers.choose("auto", put, order=(drivers.H2load(), drivers.Python()))
    assert chosen.name == "python"
    assert skipped == ["h2load: cannot send PUT with a body"] or skipped == [
        "h2load: not installed"]


def test_non_2xx_and_failures_are_counted(server_url: str) -> None:
    missing = harness.drive(drivers.Python(), server_url, Route("/no/such/route"), 2, 1.0, None)
    assert missing.requests > 0 and missing.non_2xx == missing.requests
    closed = harness.drive(drivers.Python(), f"http://127.0.0.1:{free_port()}",
                           Route("/health/"), 2, 1.0, None)
    assert closed.failed > 0 and closed.requests == 0


def test_bench_exits_non_zero_when_requests_fail(tmp_path: Path) -> None:
    served.require("granian")
    out = tmp_path / "bench.json"
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(cli, [
        "bench", "engines", "--engine", "granian", "--path", "/no/such/route", "--duration", "1",
        "--warmup", "0", "-c", "2", "--driver", "python", "--json", str(out)])
    assert result.exit_code == 1, result.output
    figures = json.loads(out.read_text())
    assert figures["configurations"][0]["failed"] > 0
    # The bench's SIGTERM handler was its run's: a stop of this test run still stops it.
    assert signal.getsignal(signal.SIGTERM) is before


# A process that catches the bench's unwinding and goes on, as pytest does with a
# SystemExit raised in a test (a `timeout 60 make test-all` landing during a bench test).
SWALLOWS_THE_UNWINDING = """
import time
from bench.command import sigterm_unwinds
try:
    with sigterm_unwinds():
        print("benching", flush=True)
        time.sleep(30)
except SystemExit:
    print("went on", flush=True)
    time.sleep(30)
"""


def test_sigterm_during_a_bench_stops_a_process_that_catches_the_unwinding() -> None:
    process = subprocess.Popen([sys.executable, "-c", SWALLOWS_THE_UNWINDING],
                               cwd=PROJECT_DIR, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "benching\n"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == -signal.SIGTERM
        assert process.stdout.read() == ""
    finally:
        process.kill()
        process.wait()


def test_unsaturated_server_is_called_a_floor() -> None:
    # Two connections to a route that sleeps 20 ms cannot keep a core busy.
    route = Route("/demo/sleep?ms=20")
    served.require("granian")
    served.require("uvicorn")
    run = harness.measure([Config("granian", "auto"), Config("uvicorn", "auto")], route,
                          drivers.Python(), connections=2, duration=1.0, slice_length=0.5,
                          warmup=0)
    for kept in run.rounds:  # however busy the machine running the suite was
        for measured in kept.slices.values():
            measured.set_aside = None
    assert all(run.saturated(index) is False for index in range(2))
    sentence = " ".join(verdict(summarize(run), route, app_cost_us=None))
    assert "could not saturate the server" in sentence and "a floor" in sentence


STREAMING_ROUTER = '''"""A streaming route, added by tests/test_bench.py for one test."""

from app.core.framework import APIRouter, StreamingResponse

router = APIRouter()


@router.get("/bench-stream/")
async def stream() -> StreamingResponse:
    async def chunks():
        for number in range(8):
            yield f"chunk {number}\\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")
'''
STREAMED = b"".join(f"chunk {number}\n".encode() for number in range(8))


@pytest.fixture
def streaming_route() -> Iterator[Route]:
    """A router of the user's kind (app/routes/), whose response has no length."""
    module = PROJECT_DIR / "app" / "routes" / "zz_bench_streaming.py"
    module.write_text(STREAMING_ROUTER)
    try:
        yield Route("/bench-stream/")
    finally:
        module.unlink()


def test_bench_engines_with_the_python_driver_on_a_streaming_route(
    streaming_route: Route, tmp_path: Path
) -> None:
    served.require("uvicorn")
    with running_server(["--engine", "uvicorn"]) as server:
        address = urlsplit(server.url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
            sock.sendall(b"GET /bench-stream/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
            responses = ResponseReader()
            while (response := responses.take(sock.recv(65536))) is None:
                pass
    assert response.header("transfer-encoding") == "chunked" and response.body == STREAMED
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, [
        "bench", "engines", "--path", streaming_route.path, "--driver", "python",
        "--duration", "2", "--slice", "0.5", "--warmup", "0", "-c", "4", "--json", str(out)])
    assert result.exit_code == 0, result.output
    for measured in json.loads(out.read_text())["configurations"]:
        assert measured["failed"] == 0, measured["label"]
        assert all(piece["requests"] > 0 for piece in measured["slices"]), measured["slices"]


def test_bench_measures_a_running_target(server_url: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, [
        "bench", "engines", "--target", server_url, "--duration", "1", "--warmup", "0",
        "-c", "2", "--driver", "python", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert server_url in result.output
    assert json.loads(out.read_text())["configurations"][0]["label"] == server_url


def test_bench_app_compares_the_app_with_bare_fastapi_on_two_cases() -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--duration", "0.2"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.stdout.count("vs bare FastAPI, same setup") == 2
    for row in ("bare FastAPI, same setup, this router only",
                "FastAPI() defaults, this router only", "this app, no middleware",
                "this app + RequestIdMiddleware only", "this app, all middleware"):
        assert result.stdout.count(f"│ {row}") == 2, result.stdout  # a row in each table
    assert result.stdout.count("The middleware alone:") == 2
    assert "GET /health/ " in result.stdout
    assert "GET /bench-user-like/items/{item_id} " in result.stdout


@pytest.mark.demo_routes
def test_bench_app_measures_a_route_with_parameters_and_headers() -> None:
    result = CliRunner().invoke(cli, [
        "bench", "app", "--path", "/demo/items/{item_id}", "--path-param", "item_id=3",
        "--duration", "0.2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.stdout.count("│ bare FastAPI, same setup, this router only") == 1


def test_bench_app_refuses_a_route_that_does_not_answer() -> None:
    result = CliRunner().invoke(cli, ["bench", "app", "--path", "/nowhere", "--duration", "0.2"])
    assert result.exit_code == 2
    assert "Cannot bench:" in result.stderr


def test_bad_route_is_refused_before_booting() -> None:
    result = CliRunner().invoke(cli, ["bench", "engines", "--path", "/demo/items/{item_id}"])
    assert result.exit_code == 2
    assert "needs --path-param for item_id" in result.stderr
