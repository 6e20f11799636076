"""SIGTERM under load drops nothing that was sent before it, on every engine.

Slow (several seconds a case): `pytest -m slow`. The template's suite runs these once
per Python rather than for every answer combination.
"""

from __future__ import annotations

import contextlib
import glob
import os
import resource
import signal
import subprocess
import time

import pytest

from tests import served
from tests.drain import drive_and_terminate
from tests.request_set import loop_for
from tests.server_process import (
    FULL_DETAIL,
    Server,
    answering_worker,
    children,
    running,
    running_server,
    wait_until,
)

pytestmark = pytest.mark.slow
GRACE = 10
# granian samples its workers' memory every few seconds (serving/engines/granian.py)
# and recycles one over the limit at the first sample after its start.
FIRST_RECYCLE_WITHIN = 15


# Keep-alive clients with one and two workers; clients that open a connection per
# request (the case where a stopping listener could drop queued connections) with one.
CASES = [(1, True), (2, True), (1, False)]


@pytest.mark.demo_routes
@pytest.mark.parametrize(("workers", "keep_alive"), CASES, ids=["1-keep-alive", "2-keep-alive",
                                                                "1-close"])
@pytest.mark.parametrize("engine", served.ENGINES)
def test_sigterm_under_load_completes_what_was_sent(
    engine: str, workers: int, keep_alive: bool
) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", str(workers)]
    env = {"WEBSERVER_GRACEFUL_TIMEOUT": str(GRACE)}
    with running_server(args, env=env) as server:
        report = drive_and_terminate(
            f"{server.url}/demo/sleep?ms=50", server.process, connections=64, signal_after=0.8,
            duration=1.6, grace=GRACE + 5, keep_alive=keep_alive,
        )
    print(report.summary())
    assert len(report.before) > 3 * 64, report.summary()  # the load really ran
    assert report.lost_before_signal == [], report.summary()
    assert report.cut_mid_response == [], report.summary()
    assert report.exited_after is not None and report.exited_after < GRACE, report.summary()


# At saturation the listen queue holds connections whose requests are written, and an
# engine closing its listener resets them: 1-40 of ~3,000 in some runs. To have them
# queued at every SIGTERM, the server is stopped (SIGSTOP) for 0.3 s before it while a
# connection-per-request load goes on, as when the machine takes the core away.
STALL = 0.3


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("engine", served.ENGINES)
def test_sigterm_at_saturation_resets_no_queued_connection(engine: str, workers: int) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), "--workers", str(workers)]
    env = {"WEBSERVER_GRACEFUL_TIMEOUT": str(GRACE)}
    with running_server(args, env=env) as server:
        report = drive_and_terminate(
            f"{server.url}/health/", server.process, connections=64, signal_after=1.0,
            duration=2.0, grace=GRACE + 5, keep_alive=False, stall=STALL,
        )
    print(report.summary())
    assert len(report.before) > 3 * 64, report.summary()  # the load really ran
    assert report.lost_before_signal == [], report.summary()
    assert report.cut_mid_response == [], report.summary()
    assert report.exited_after is not None and report.exited_after < GRACE, report.summary()


@pytest.mark.demo_routes
@pytest.mark.parametrize("engine", served.ENGINES)
def test_grace_period_bounds_the_wait_for_slow_requests(engine: str) -> None:
    env = {"WEBSERVER_GRACEFUL_TIMEOUT": "1"}
    with running_server(["--engine", engine, "--loop", loop_for(engine)], env=env) as server:
        report = drive_and_terminate(
            f"{server.url}/demo/sleep?ms=8000", server.process, connections=4, signal_after=0.5,
            duration=1.5, grace=15,
        )
    # The 8 s requests cannot finish: the server must give up on them after ~1 s, and
    # exit before they could have ended (7.5 s after the signal), with room for a loaded
    # machine.
    assert report.exited_after is not None and report.exited_after < 6, report.summary()


@pytest.mark.parametrize("engine", served.ENGINES)
def test_a_server_stopped_while_a_worker_starts_stops_in_time(engine: str) -> None:
    """kill -9 a worker, then SIGTERM the server 50 ms after the replacement exists,
    while it imports the app: the server must stop well within the graceful timeout.
    gunicorn on uvloop took the whole timeout (30 s by default): its new worker set its
    handlers on a loop that was not running yet, and uvloop dropped the signal (asyncio
    keeps it: uvloop is the loop to test)."""
    served.require(engine, "uvloop")
    args = ["--engine", engine, "--loop", "uvloop", "--workers", "2", "--respawn-failed-workers"]
    with running_server(args, env=FULL_DETAIL) as server:  # its pid
        kill_a_worker_and_catch_its_replacement(server)
        time.sleep(0.05)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=GRACE)
        waited = time.monotonic() - signalled
        log = server.output()
    print(f"{engine}: stopped {waited:.2f} s after SIGTERM")
    assert waited < GRACE, f"still running {GRACE} s after SIGTERM:\n{log[-3000:]}"


def test_a_granian_worker_stopped_as_it_starts_leaves_a_server_that_stops() -> None:
    """SIGTERM to a replacement worker the moment it exists: it must stop, and its server
    on a SIGTERM. Forked (Python 3.13 and older), it ran the launcher's handler (the
    drain's) until it built the app and lost the signal; spawned (3.14 and newer), one
    dead before granian handed it what to run ended granian's supervising loop: its other
    worker served on, and the server ignored its stop."""
    served.require("granian", "uvloop")
    with running_server(granian_respawning(workers=2), env=FULL_DETAIL) as server:
        born = kill_a_worker_and_catch_its_replacement(server)
        for pid in born:
            os.kill(pid, signal.SIGTERM)
        gone = wait_until(lambda: not any(running(pid) for pid in born), timeout=5)
        assert gone, f"a worker signalled as it started still runs:\n{server.output()[-3000:]}"
        assert_stops_on_sigterm(server)


def test_a_granian_worker_killed_as_it_replaces_a_recycled_one_leaves_a_server_that_stops(
) -> None:
    """granian recycles its worker by memory; the replacement is killed the moment it
    exists (as the OOM killer would). Spawned (3.14 and newer) and dead before granian
    handed it what to run, it ended granian's supervising loop with the old worker already
    off its list: granian's own shutdown left that one serving, and the server waited on
    it for good."""
    served.require("granian", "uvloop")
    with running_server(granian_respawning("--worker-max-memory", "1", workers=1),
                        env=FULL_DETAIL) as server:
        old = answering_worker(server)
        before = set(children(server.process.pid))
        for pid in catch_the_next_worker(server, before, timeout=FIRST_RECYCLE_WITHIN):
            os.kill(pid, signal.SIGKILL)
        assert_stops_on_sigterm(server)
        assert wait_until(lambda: not running(old), timeout=5), (
            f"the recycled worker outlived its server:\n{server.output()[-3000:]}")


def test_a_granian_server_that_cannot_start_a_worker_stops_the_others() -> None:
    """The launcher out of file descriptors when granian replaces a failed worker: the
    spawn raises in granian's supervising loop, on every Python. Its other worker must
    stop, and the server exit 1 with one line that says so."""
    served.require("granian", "uvloop")
    with running_server(granian_respawning(workers=2), env=FULL_DETAIL) as server:
        launcher = server.process.pid
        started = set(children(launcher))  # its workers and helpers, all to end with it
        open_now = len(os.listdir(f"/proc/{launcher}/fd"))
        resource.prlimit(launcher, resource.RLIMIT_NOFILE, (open_now, open_now))
        os.kill(answering_worker(server), signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=GRACE)
        log = server.output()
        assert server.process.returncode == 1, f"exit {server.process.returncode}:\n{log[-3000:]}"
        assert "granian stopped supervising its workers" in log, log[-3000:]
        assert wait_until(lambda: not any(running(pid) for pid in started), timeout=5), (
            f"a child outlived its server:\n{log[-3000:]}")


def granian_respawning(*extra: str, workers: int) -> list[str]:
    """granian on uvloop, replacing a failed worker."""
    return ["--engine", "granian", "--loop", "uvloop", "--workers", str(workers),
            "--respawn-failed-workers", *extra]


def assert_stops_on_sigterm(server: Server) -> None:
    """The server stops within GRACE of a SIGTERM, or has exited by itself (granian does
    when a replacement dies at once: "Worker crash loop detected")."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.process.wait(timeout=GRACE)
    assert server.process.poll() is not None, (
        f"still running {GRACE} s after SIGTERM:\n{server.output()[-3000:]}")


def kill_a_worker_and_catch_its_replacement(server: Server) -> set[int]:
    """SIGKILL the worker that answers; the pids its server forks or spawns next."""
    before = set(children(server.process.pid))
    os.kill(answering_worker(server), signal.SIGKILL)
    return catch_the_next_worker(server, before, timeout=10)


def catch_the_next_worker(server: Server, before: set[int], timeout: float) -> set[int]:
    """The server's children not in `before`, read as soon as they exist: the kernel's
    per-thread children lists, polled without a pause (a core busy until then), catch a
    worker before it has run any of its own code."""
    launcher = server.process.pid
    deadline, born = time.monotonic() + timeout, set()
    while not born and time.monotonic() < deadline:
        for listing in glob.glob(f"/proc/{launcher}/task/*/children"):
            with contextlib.suppress(OSError), open(listing) as found:
                born |= {int(pid) for pid in found.read().split()} - before
    assert born, f"no new worker within {timeout} s:\n{server.output()[-3000:]}"
    return born
