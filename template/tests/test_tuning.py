"""Each production setting does what it says, on a real server, on each engine that
honours it (the others refuse it: tests/test_settings.py). Slow: `pytest -m slow`;
the worker lifetime test waits a minute: `pytest -m long`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import httpx
import pytest
from websockets.sync.client import connect

from bench.http1 import Response, ResponseReader
from tests import served
from tests.server_process import connection_per_request, running_server

pytestmark = pytest.mark.slow
ENGINES = served.ENGINES


@pytest.fixture(autouse=True)
def full_health_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests read the worker's pid from /health/detailed, whose full report is off
    by default (docs/security.md); the servers below inherit this."""
    monkeypatch.setenv("WEBSERVER_HEALTH_DETAIL", "full")


# The engines each setting below is tested on, written out: the claims this file holds
# the engines to. Dropping a claim from the matrix (FEATURES in app/core/loops.py) does
# not drop its test; the matrix must go on making it (test_the_matrix_makes_these_claims).
HONOURED_BY = {
    "backlog": ("uvicorn", "granian", "gunicorn", "hypercorn"),
    "threads": ("granian",),
    "websockets": ("uvicorn", "granian", "gunicorn", "hypercorn"),
    "max_concurrency": ("uvicorn", "granian"),
    "worker_lifetime": ("granian",),
    "respawn_failed_workers": ("uvicorn", "granian", "gunicorn", "hypercorn"),
    "keepalive_timeout": ("uvicorn", "granian", "gunicorn", "hypercorn"),
    "access_log": ("uvicorn", "granian", "gunicorn", "hypercorn"),
}


def honouring(setting: str) -> tuple[str, ...]:
    """The engines that honour `setting`, among those this project serves."""
    return tuple(engine for engine in HONOURED_BY[setting] if engine in served.ENGINES)


def detail(url: str) -> dict:
    return httpx.get(f"{url}/health/detailed", headers={"Connection": "close"}).json()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed here")
@pytest.mark.parametrize("engine", honouring("backlog"))
def test_backlog_is_the_listen_queue(engine: str) -> None:
    with running_server(["--engine", engine, "--backlog", "1234"]) as server:
        # gunicorn's worker listens with asyncio's 100 first and is set to the backlog
        # once its servers exist (serving/engines/gunicorn/): a moment after it answers.
        deadline = time.monotonic() + 5
        while True:
            listing = subprocess.run(["ss", "-ltnH", f"sport = :{port_of(server.url)}"],
                                     capture_output=True, text=True, check=True).stdout
            send_q = {int(line.split()[2]) for line in listing.splitlines()}
            if send_q == {1234} or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert send_q == {1234}, listing  # ss shows a listener's backlog as Send-Q


@pytest.mark.parametrize("engine", honouring("threads"))
def test_threads_are_runtime_threads_of_the_worker(engine: str) -> None:
    counts = {}
    for threads in (1, 4):
        with running_server(["--engine", engine, "--threads", str(threads)]) as server:
            pid = detail(server.url)["pid"]
            counts[threads] = len(os.listdir(f"/proc/{pid}/task"))
    assert counts[4] - counts[1] == 3, counts


@pytest.mark.parametrize("engine", honouring("websockets"))
def test_websockets_off_refuses_the_upgrade(engine: str) -> None:
    with running_server(["--engine", engine, "--no-websockets"]) as server:
        ws_url = server.url.replace("http://", "ws://", 1) + "/ws/echo"
        # The handshake is not accepted.
        with pytest.raises(Exception) as refused, connect(ws_url, open_timeout=5) as websocket:
            websocket.send("x")
            websocket.recv(timeout=5)
        assert httpx.get(f"{server.url}/health/").status_code == 200
    print(f"{engine}: {type(refused.value).__name__}: {refused.value}")


async def _concurrent(url: str, count: int) -> tuple[list[int], float]:
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=30) as client:
        answers = await asyncio.gather(*(client.get(url) for _ in range(count)))
    return [answer.status_code for answer in answers], time.monotonic() - started


@pytest.mark.demo_routes
@pytest.mark.parametrize("engine", honouring("max_concurrency"))
def test_max_concurrency_past_the_cap(engine: str) -> None:
    """Requests of 200 ms against a cap of 2: one alone passes on each engine; 4 at once
    get 503 from uvicorn, which counts open connections (the request's own included)
    against the cap, and all wait their turn under granian (docs/deploy.md)."""
    url_args = ["--engine", engine, "--max-concurrency", "2"]
    with running_server(url_args) as server:
        under, _ = asyncio.run(_concurrent(f"{server.url}/demo/sleep?ms=200", 1))
        statuses, seconds = asyncio.run(_concurrent(f"{server.url}/demo/sleep?ms=200", 4))
    print(f"{engine}: 4 at once: {sorted(statuses)} in {seconds:.2f} s")
    assert under == [200]
    if engine == "uvicorn":
        assert statuses.count(503) >= 3, statuses
    else:
        assert statuses == [200] * 4 and seconds >= 2 * 0.2, (statuses, seconds)


def _pids_under_load(url: str, requests: int, seconds: float, pause: float = 0.0,
                     enough_pids: int = 0) -> tuple[set[int], list[str]]:
    """A new connection per request, at least `requests` of them and for at least
    `seconds` (`pause` between them), or until `enough_pids` workers have answered;
    the pids seen and every failure."""
    pids, failures = set(), []
    deadline, sent = time.monotonic() + seconds, 0
    # A long timeout: when both of uvicorn's workers recycle at once, a request waits in
    # the listen queue until a new one has started (seconds, on a loaded machine): late,
    # not lost.
    with connection_per_request(timeout=30) as client:
        while sent < requests or time.monotonic() < deadline:
            if enough_pids and len(pids) >= enough_pids:
                break
            sent += 1
            try:
                answer = client.get(f"{url}/health/detailed")
                if answer.status_code != 200:
                    failures.append(str(answer.status_code))
                else:
                    pids.add(answer.json()["pid"])
            except httpx.TransportError as error:
                failures.append(repr(error))
            time.sleep(pause)
    return pids, failures


# Recycling by request count and by memory, under load: tests/test_restarts.py.
@pytest.mark.long
@pytest.mark.parametrize("engine", honouring("worker_lifetime"))
def test_a_worker_is_recycled_after_its_lifetime(engine: str) -> None:
    """granian refuses a lifetime under 60 s, so this waits about a minute (idle)."""
    args = ["--engine", engine, "--worker-lifetime", "60", "--respawn-failed-workers"]
    with running_server(args) as server:
        first = detail(server.url)["pid"]
        pids, failures = _pids_under_load(server.url, 0, 75.0, pause=0.5, enough_pids=2)
    print(f"{engine}: pids {sorted(pids)}, failures {failures}")
    assert first in pids and len(pids) >= 2, pids
    assert failures == [], failures


@pytest.mark.parametrize("engine", honouring("respawn_failed_workers"))
def test_a_killed_worker_is_replaced_when_respawn_is_on(engine: str) -> None:
    with running_server(["--engine", engine, "--respawn-failed-workers"]) as server:
        first = detail(server.url)["pid"]
        os.kill(first, signal.SIGKILL)
        deadline, replaced = time.monotonic() + 10, None
        while time.monotonic() < deadline and replaced is None:
            try:
                pid = detail(server.url)["pid"]
                replaced = pid if pid != first else None
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(0.2)
        waited = 10 - (deadline - time.monotonic())
    print(f"{engine}: a new worker served {waited:.1f} s after kill -9")
    assert replaced is not None, "no new worker within 10 s"


@pytest.mark.parametrize("engine", honouring("respawn_failed_workers"))
def test_a_killed_worker_stops_the_server_when_respawn_is_off(engine: str) -> None:
    with running_server(["--engine", engine, "--workers", "2",
                         "--no-respawn-failed-workers"]) as server:
        os.kill(detail(server.url)["pid"], signal.SIGKILL)
        server.process.wait(timeout=15)
    assert server.process.returncode not in (0, None), server.output()[-2000:]


def test_a_uvicorn_worker_stopped_by_sigterm_is_not_taken_for_a_recycled_one() -> None:
    """A worker sent SIGTERM by someone else exits as a failed one (-15), not as a
    recycled one (0): with respawn off the server stops. uvicorn's workers are forked
    from the launcher, whose supervisor queues the signals it gets: a worker that kept
    its handler would end with 0 and be replaced."""
    served.require("uvicorn")
    with running_server(["--engine", "uvicorn", "--workers", "2",
                         "--no-respawn-failed-workers"]) as server:
        os.kill(detail(server.url)["pid"], signal.SIGTERM)
        server.process.wait(timeout=15)
        output = server.output()
    assert server.process.returncode not in (0, None), output[-2000:]
    assert "died with exit code -15" in output, output[-2000:]


def read_response(sock: socket.socket) -> Response:
    """One whole response, however its body is framed (bench/http1.py)."""
    responses = ResponseReader()
    while (response := responses.take(sock.recv(65536))) is None:
        pass
    return response


@pytest.mark.parametrize("engine", honouring("keepalive_timeout"))
def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(engine: str) -> None:
    # granian times an idle connection and a request head with one timer, the longer of
    # the two settings: the header timeout (5 s by default) is brought down with it.
    args = ["--engine", engine, "--keepalive-timeout", "1", "--header-timeout", "1"]
    with running_server(args) as server, \
            socket.create_connection(("127.0.0.1", port_of(server.url)), timeout=10) as sock:
        sock.sendall(b"GET /health/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert read_response(sock).status == 200
        idle_since = time.monotonic()
        closed = sock.recv(1) == b""
        idle = time.monotonic() - idle_since
    assert closed and 0.8 <= idle <= 3, idle


TEXT_LINE = re.compile(r'(?P<time>\S+) (?P<client>\S+) "(?P<method>[A-Z]+) (?P<path>\S+)" '
                       r"(?P<status>\d{3}) (?P<duration_ms>[\d.]+)ms (?P<request_id>\S+)")
FIELDS = {"time", "client", "method", "path", "status", "duration_ms", "request_id"}


def _access_lines(engine: str, log_format: str) -> list[str]:
    with running_server(["--engine", engine], env={"WEBSERVER_ACCESS_LOG": log_format,
                                                   "WEBSERVER_LOG_LEVEL": "warning"}) as server:
        httpx.get(f"{server.url}/health/", headers={"X-Request-ID": "req-1"})
        httpx.get(f"{server.url}/static/hello.txt", headers={"X-Request-ID": "req-2"})
        time.sleep(0.3)
        output = server.output()
    return [line for line in output.splitlines() if "req-1" in line or "req-2" in line]


def test_access_log_lines_have_the_same_fields_on_every_engine() -> None:
    shapes = {}
    for engine in honouring("access_log"):
        json_lines = [json.loads(line) for line in _access_lines(engine, "json")]
        text_lines = [TEXT_LINE.fullmatch(line) for line in _access_lines(engine, "text")]
        assert len(json_lines) == 2 and len(text_lines) == 2 and all(text_lines), engine
        assert [set(line) for line in json_lines] == [FIELDS, FIELDS]
        assert [line["path"] for line in json_lines] == ["/health/", "/static/hello.txt"]
        assert [(m["status"], m["request_id"]) for m in text_lines] == [
            ("200", "req-1"), ("200", "req-2")]
        shapes[engine] = [(line["method"], line["path"], line["status"], line["request_id"])
                          for line in json_lines]
    assert len(set(map(tuple, shapes.values()))) == 1, shapes
