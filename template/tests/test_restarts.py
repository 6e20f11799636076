"""Restarts nobody notices, on every engine (docs/reliability.md):

- SIGTERM with a stream of server-sent events and a WebSocket open: the stream sends
  its last event (it watches `server_stopping`), the WebSocket gets close code 1012,
  and the server exits within 3 s, with no traceback and no ERROR line;
- SIGHUP under saturating load replaces the workers with the code on disk and loses no
  request; a version that fails to load is refused and the old workers go on serving;
- recycling every 50 requests under load loses no request;
- Ctrl-C in a terminal (SIGINT to the launcher and every worker) stops each engine on
  each loop, and the dev server, with no traceback.
"""

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
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.core import loops
from app.core.answers import ANSWERS
from app.core.setting_specs import BY_NAME
from bench.http1 import ResponseReader
from tests import served
from tests.drain import drive_and_stop
from tests.request_set import loop_for
from tests.server_process import (
    PROJECT_DIR,
    Server,
    free_port,
    running,
    running_server,
    wait_until,
    worker_pids,
)

pytestmark = pytest.mark.slow
# Well under the default grace period (30 s), which a stop held by its streams would take,
# with a margin for a loaded machine.
STOP_WITHIN = 10.0


def first_event_then_rest(server: Server, path: str, seen: list[str],
                          started: threading.Event) -> None:
    """Read an event stream to its end; `seen` gets each line, then "END" when the
    stream ended properly (its last chunk), or the error."""
    try:
        with httpx.stream("GET", f"{server.url}{path}", timeout=15) as answer:
            for line in answer.iter_lines():
                seen.append(line)
                started.set()
        seen.append("END")
    except httpx.HTTPError as error:
        seen.append(f"ERROR {type(error).__name__}: {error}")
    started.set()


def websocket_until_closed(server: Server, codes: list[int | None],
                           started: threading.Event) -> None:
    with connect(f"ws://{server.url.removeprefix('http://')}/ws/echo",
                 open_timeout=5) as websocket:
        websocket.send("hello")
        websocket.recv(timeout=5)
        started.set()
        try:
            websocket.recv(timeout=15)
        except ConnectionClosed as closed:
            codes.append(closed.rcvd.code if closed.rcvd else None)
        except TimeoutError:
            codes.append(-1)


@pytest.mark.demo_routes
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("engine", served.ENGINES)
def test_sigterm_ends_open_streams_and_websockets(engine: str, workers: int) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", str(workers)]
    streams: list[list[str]] = [[] for _ in range(2 * workers)]
    codes: list[int | None] = []
    with running_server(args) as server:
        threads, started = [], []
        for seen in streams:
            started.append(threading.Event())
            threads.append(threading.Thread(target=first_event_then_rest, daemon=True,
                                            args=(server, "/demo/events?every=0.2", seen,
                                                  started[-1])))
        for _ in range(workers):
            started.append(threading.Event())
            threads.append(threading.Thread(target=websocket_until_closed, daemon=True,
                                            args=(server, codes, started[-1])))
        for thread in threads:
            thread.start()
        assert all(event.wait(10) for event in started), streams
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=35)
        stopped_after = time.monotonic() - signalled
        for thread in threads:
            thread.join(timeout=5)
        output = server.output()
    print(f"{engine}, {workers} worker(s): exit {server.process.returncode} after "
          f"{stopped_after:.2f} s; WebSocket close codes {codes}")
    for seen in streams:
        assert seen[-1] == "END", (seen[-3:], output[-3000:])
        assert "event: bye" in seen, seen[-3:]
    assert codes == [1012] * workers, (codes, output[-3000:])
    assert stopped_after < STOP_WITHIN, output[-3000:]
    assert "Traceback" not in output and "ERROR" not in output, output[-3000:]


def copy_of_the_project(into: Path) -> Path:
    """The app and the serving layer it runs on, to edit (never the project itself)."""
    for package in ("app", "serving", "cli"):
        shutil.copytree(PROJECT_DIR / package, into / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return into / "app" / "api" / "health.py"


NEW_VERSION = '''

@router.get("/version")
async def version() -> dict[str, str]:
    return {"version": "new"}
'''


def served_version(server: Server) -> str:
    answer = httpx.get(f"{server.url}/health/version", timeout=5)
    return answer.json()["version"] if answer.status_code == 200 else str(answer.status_code)


@pytest.fixture(autouse=True)
def full_health_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's pid from /health/detailed, whose full report is off by default."""
    monkeypatch.setenv("WEBSERVER_HEALTH_DETAIL", "full")


@pytest.fixture
def editable(tmp_path: Path) -> Iterator[Path]:
    yield copy_of_the_project(tmp_path)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("engine", served.ENGINES)
def test_sighup_under_load_serves_the_new_code_and_loses_nothing(
    engine: str, workers: int, editable: Path,
) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", str(workers)]
    with running_server(args, cwd=editable.parents[2]) as server:
        before = worker_pids(server, workers=workers)
        assert served_version(server) == "404"
        editable.write_text(editable.read_text() + NEW_VERSION)
        # The load goes on through the reload (the check, then each worker in turn) and
        # a second past the last old worker's exit.
        report = drive_and_stop(
            f"{server.url}/health/", lambda: server.process.send_signal(signal.SIGHUP),
            lambda: None, connections=64, signal_after=1.0, duration=30.0, keep_alive=False,
            until=lambda: not any(running(pid) for pid in before), then=1.0)
        done = wait_until(lambda: not worker_pids(server, tries=10) & before, timeout=30)
        after = worker_pids(server, workers=workers)
        version = served_version(server)
        output = server.output()
    failed = [o for o in report.outcomes if o.status != 200]
    print(f"{engine}, {workers} worker(s): {len(report.outcomes)} requests, "
          f"{len(failed)} failed; workers {sorted(before)} -> {sorted(after)}")
    assert done, output[-3000:]
    assert len(report.outcomes) > 3 * 64, output[-3000:]  # the load really ran
    assert failed == [], (failed[:5], output[-3000:])
    assert version == "new", output[-3000:]
    assert not before & after, (before, after)
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.parametrize("engine", served.ENGINES)
def test_sighup_with_a_broken_version_keeps_the_old_workers(engine: str,
                                                          editable: Path) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "2"]
    with running_server(args, cwd=editable.parents[2]) as server:
        before = worker_pids(server, workers=2)
        editable.write_text(editable.read_text() + "\ndef broken(:\n")
        server.process.send_signal(signal.SIGHUP)
        refused = wait_until(lambda: "Reload refused" in server.output(), timeout=30)
        time.sleep(1.0)
        alive = server.process.poll() is None
        after = worker_pids(server, workers=2) if alive else set()
        output = server.output()
    print(output[-1500:])
    assert refused, output[-3000:]
    assert alive, output[-3000:]
    assert after == before, (before, after)
    refusal = next(line for line in output.splitlines() if "Reload refused" in line)
    assert "SyntaxError" in refusal and "app/api/health.py:" in refusal, refusal


YOUR_CUSTOMIZE = '''

def customize(app: FastAPI) -> None:
    @app.get("/custom-version")
    async def custom_version() -> dict[str, str]:
        return {"version": "new"}
'''


@pytest.mark.parametrize("engine", served.ENGINES)
def test_sighup_serves_your_new_custom_py(engine: str, editable: Path) -> None:
    """app/custom.py is read by the launcher too (your APP_ settings are checked before
    serving): a worker forked from it must still build the app from the file on disk."""
    custom = editable.parents[1] / "custom.py"
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "1"]
    with running_server(args, cwd=editable.parents[2]) as server:
        before = worker_pids(server)
        custom.write_text(custom.read_text() + YOUR_CUSTOMIZE)
        server.process.send_signal(signal.SIGHUP)
        done = wait_until(lambda: replaced(server, before), timeout=30)
        # The new worker's answer, once it serves (a worker spawned on 3.14+ by granian
        # may take a moment after the old one is gone).
        answered = wait_until(lambda: answers_new_version(server), timeout=15)
        answer = httpx.get(f"{server.url}/custom-version", timeout=5)
        output = server.output()
    assert done, output[-3000:]
    assert answered, (answer.status_code, answer.text, output[-3000:])
    assert answer.json() == {"version": "new"}


def replaced(server: Server, before: set[int]) -> bool:
    """None of `before` runs any more, and a worker answers. (granian lets the old worker
    serve for seconds next to its successor: answering no request is not gone.)"""
    if any(running(pid) for pid in before):
        return False
    try:
        return bool(worker_pids(server, tries=1))
    except httpx.TransportError:  # between two workers
        return False


def answers_new_version(server: Server) -> bool:
    try:
        answer = httpx.get(f"{server.url}/custom-version", timeout=5)
    except httpx.TransportError:
        return False
    return answer.status_code == 200 and answer.json() == {"version": "new"}


# How each engine recycles: by request count where it can, granian by memory (it
# samples every 5 s; 1 MiB is less than any worker's).
RECYCLING = {"uvicorn": ["--worker-max-requests", "50"],
             "gunicorn": ["--worker-max-requests", "50"],
             "granian": ["--worker-max-memory", "1", "--respawn-failed-workers"],
             "hypercorn": ["--worker-max-requests", "50"]}
# The line each engine writes for every worker it starts.
WORKER_STARTED = {"uvicorn": "Started server process", "granian": "Spawning worker-",
                  "gunicorn": "Booting worker with pid", "hypercorn": "Running on http://"}


# Two workers, with and without keep-alive; and granian's only worker, replaced with no
# other worker serving meanwhile.
RECYCLING_ROWS = [
    *(pytest.param(engine, 2, keep_alive, id=f"{engine}-{'keep-alive' if keep_alive else 'close'}")
      for engine in served.ENGINES for keep_alive in (False, True)),
    *([pytest.param("granian", 1, False, id="granian-one-worker")]
      if "granian" in served.ENGINES else []),
]


@pytest.mark.parametrize(("engine", "workers", "keep_alive"), RECYCLING_ROWS)
def test_recycling_under_load_loses_no_request(engine: str, workers: int,
                                                keep_alive: bool) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", str(workers),
            *RECYCLING[engine]]
    with running_server(args) as server:
        # Until a worker has replaced a recycled one (granian samples memory every 5 s),
        # and long enough after for its predecessor to stop under the load (granian
        # stops it seconds after starting the successor).
        report = drive_and_stop(f"{server.url}/health/detailed", lambda: None, lambda: None,
                                connections=16, signal_after=0.1, duration=30.0,
                                keep_alive=keep_alive, then=5.0 if engine == "granian" else 2.0,
                                until=lambda: server.output().count(
                                    WORKER_STARTED[engine]) > workers)
        output = server.output()
    failed = [o for o in report.outcomes if o.status != 200]
    recycles = output.count(WORKER_STARTED[engine]) - workers
    print(f"{engine}: {len(report.outcomes)} requests, {recycles} recycles, "
          f"{len(failed)} failed: {[o.error for o in failed[:5]]}")
    assert recycles >= 1, output[-3000:]
    assert failed == [], ([o.error for o in failed[:5]], output[-3000:])


@pytest.mark.parametrize("engine", served.ENGINES)
def test_the_reload_command_finds_the_server_by_its_port(engine: str) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "2"]
    with running_server(args) as server:
        before = worker_pids(server, workers=2)
        port = server.url.rsplit(":", 1)[1]
        sent = subprocess.run([sys.executable, "-m", "cli", "reload", "--port", port],
                              capture_output=True, text=True, timeout=30, check=False)
        replaced = wait_until(lambda: not worker_pids(server, tries=10) & before, timeout=30)
    assert sent.returncode == 0, sent.stderr
    assert f"pid {server.process.pid}" in sent.stdout, sent.stdout
    assert replaced, server.output()[-3000:]


def test_the_reload_command_says_when_nothing_listens() -> None:
    sent = subprocess.run([sys.executable, "-m", "cli", "reload", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=30, check=False)
    assert sent.returncode != 0
    assert "listens on port" in sent.stderr and "Traceback" not in sent.stderr, sent.stderr


@pytest.mark.parametrize("engine", served.ENGINES)
def test_sigterm_closes_idle_kept_alive_connections(engine: str) -> None:
    """A pooling client's idle connections: closed at once, not held until their
    keep-alive timeout (or the grace period) runs out."""
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "2"]
    env = {"WEBSERVER_KEEPALIVE_TIMEOUT": "60"}
    with running_server(args, env=env) as server:
        host, port = server.url.removeprefix("http://").split(":")
        idle = []
        for _ in range(4):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(f"GET /health/ HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            responses = ResponseReader()
            while (response := responses.take(sock.recv(65536))) is None:
                pass
            assert response.status == 200 and not response.closes
            idle.append(sock)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        closed_after = []
        for sock in idle:
            try:
                ended = sock.recv(65536) == b""
            except ConnectionResetError:
                ended = True
            closed_after.append(round(time.monotonic() - signalled, 2) if ended else None)
            sock.close()
        server.process.wait(timeout=35)
        stopped_after = time.monotonic() - signalled
    print(f"{engine}: idle connections closed after {closed_after} s; exit after "
          f"{stopped_after:.2f} s")
    assert all(after is not None and after < STOP_WITHIN for after in closed_after), closed_after
    assert stopped_after < STOP_WITHIN


@pytest.mark.parametrize("engine", served.ENGINES)
def test_two_sighups_in_a_row_leave_as_many_workers_as_before(engine: str) -> None:
    """A second SIGHUP while a reload runs: the reloads run in turn, and the server
    ends with its number of workers, all new."""
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "2"]
    with running_server(args) as server:
        before = worker_pids(server, workers=2)
        server.process.send_signal(signal.SIGHUP)
        time.sleep(0.05)
        server.process.send_signal(signal.SIGHUP)

        def settled() -> bool:
            first = worker_pids(server, workers=2)
            if len(first) != 2 or first & before:
                return False
            time.sleep(2.0)
            return worker_pids(server, workers=2) == first

        done = wait_until(settled, timeout=60)
        output = server.output()
    assert len(before) == 2
    assert done, output[-3000:]


# Your lifespan, held at its start while the marker exists: a worker that is still
# starting when the stop comes (appended, so it wraps whatever your lifespan does).
HELD_START = '''

from contextlib import asynccontextmanager as _held_start
from pathlib import Path as _Path
_your_lifespan = lifespan


@_held_start
async def lifespan(app):
    import asyncio
    marker = _Path(__file__).with_name("hold-start")
    if marker.exists():
        marker.with_name("held").touch()
        await asyncio.sleep(HELD_FOR)
    async with _your_lifespan(app) as state:
        yield state
'''
HELD_FOR = 60  # seconds: longer than the grace period a stop would wait for it
# A stop that waits for the starting worker takes its start or the whole grace period;
# granian's own reload first replaces each remaining worker, seconds apart.
STOP_DURING_RELOAD_WITHIN = 20.0


@pytest.mark.parametrize("engine", served.ENGINES)
def test_sigterm_during_a_sighup_reload_does_not_wait_for_a_starting_worker(
    engine: str, editable: Path,
) -> None:
    """A rollout's SIGTERM during a reload: the server stops without waiting for the new
    worker to start (it serves nothing yet), leaves no worker behind, and does not say
    that a worker failed to serve."""
    custom = editable.parents[1] / "custom.py"
    custom.write_text(custom.read_text() + HELD_START.replace("HELD_FOR", str(HELD_FOR)))
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", "2"]
    with running_server(args, cwd=editable.parents[2]) as server:
        worker_pids(server, workers=2)  # both started
        custom.with_name("hold-start").touch()
        server.process.send_signal(signal.SIGHUP)
        held = wait_until(custom.with_name("held").exists, timeout=30)
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            code: int | None = server.process.wait(timeout=STOP_DURING_RELOAD_WITHIN)
        except subprocess.TimeoutExpired:
            code = None
        stopped_after = time.monotonic() - sent
        output = server.output()
    print(f"{engine}: stopped {stopped_after:.1f} s after SIGTERM, exit {code}")
    assert held, output[-3000:]
    assert code == 0, f"exit {code}, {stopped_after:.1f} s after SIGTERM: {output[-3000:]}"
    with pytest.raises(ConnectionRefusedError):  # no worker outlived the launcher
        socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=2)
    assert "did not serve within" not in output, output[-3000:]
    # granian's reload is its own, and says nothing of a stop.
    assert engine == "granian" or "Reload stopped: the server is stopping." in output, \
        output[-3000:]
    assert "Traceback" not in output, output[-3000:]


# Each engine on each loop it takes here, as `make serve ENGINE=... LOOP=...` runs it.
CTRL_C_ROWS = [(engine, loop) for engine, loop in served.PAIRS if loops.is_installed(loop)]
# A server has its graceful timeout to stop, and a little more: under load one granian
# worker once outlived a Ctrl-C by 20 s (CHANGELOG 0.23.0), quietly.
CTRL_C_WAIT = BY_NAME["graceful_timeout"].default_for(ANSWERS) + 10  # seconds


def interrupted(args: list[str]) -> tuple[str, int | None]:
    """The server's output after Ctrl-C, as a terminal sends it (SIGINT to the process
    group), and its exit code (None: still running after CTRL_C_WAIT)."""
    with running_server(args, new_session=True) as server:
        os.killpg(server.process.pid, signal.SIGINT)
        try:
            code: int | None = server.process.wait(timeout=CTRL_C_WAIT)
        except subprocess.TimeoutExpired:
            code = None
        return server.output(), code


# How a server stopped by Ctrl-C may exit: 0, or as interrupted (130, or killed by it).
INTERRUPTED_EXITS = (0, 128 + signal.SIGINT, -signal.SIGINT)


def assert_quiet(output: str, code: int | None) -> None:
    assert code in INTERRUPTED_EXITS, (code, output[-2000:])
    assert "Traceback" not in output, output[-3000:]
    assert not [line for line in output.splitlines() if "ERROR" in line], output[-3000:]


@pytest.mark.parametrize(("engine", "loop"), CTRL_C_ROWS)
def test_ctrl_c_stops_every_worker_quietly(engine: str, loop: str) -> None:
    assert_quiet(*interrupted(["--engine", engine, "--loop", loop]))


@pytest.mark.parametrize("engine", served.ENGINES)
def test_ctrl_c_stops_the_dev_server_quietly(engine: str) -> None:
    assert_quiet(*interrupted(["--engine", engine, "--reload"]))
