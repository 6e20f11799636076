"""Boot each configuration, load each the same way, in interleaved rounds.

Fairness: every server is booted once through the project's launcher (reload off),
warmed up, then measured in interleaved rounds (A B A B ...); medians with min-max
are reported. On a machine with two or more cores the servers are pinned to core 0
and the driver to the others.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from bench import drivers
from bench.model import Config, Measured, Round
from bench.process_cpu import tree_cpu_seconds
from bench.route import Route


def cores() -> tuple[set[int] | None, set[int] | None]:
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return {available[0]}, set(available[1:])


def _pinned(core_set: set[int] | None):  # a subprocess preexec_fn, or None
    return (lambda: os.sched_setaffinity(0, core_set)) if core_set else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    # urllib, not httpx: `bench engines` runs from a production install too.
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def booted(config: Config, server_cores: set[int] | None) -> Iterator[tuple[str, int]]:
    """The project's own launcher on a free port; yields (base URL, pid)."""
    port = _free_port()
    env = {**os.environ, "WEBSERVER_RELOAD": "false", "WEBSERVER_WORKERS": str(config.workers),
           "WEBSERVER_HTTP2": "false", "WEBSERVER_LOG_LEVEL": "warning"}
    argv = [sys.executable, "-m", "app", "serve", "--engine", config.engine, "--loop",
            config.loop, "--http", config.http, "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, preexec_fn=_pinned(server_cores))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{config.label} did not start: "
                                   f"{process.stderr.read().decode()[-1000:]}")  # type: ignore[union-attr]
            if answers(f"{url}/health/"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{config.label} did not answer within 30 s")
            time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def drive(driver: drivers.Driver, url: str, route: Route, connections: int, seconds: float,
          driver_cores: set[int] | None) -> drivers.LoadResult:
    with tempfile.TemporaryDirectory() as workdir:
        argv = driver.command(url + route.path, route, connections, seconds, Path(workdir))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60,
                              preexec_fn=_pinned(driver_cores))
    if done.returncode != 0:
        raise drivers.DriverError(f"{driver.name} exited {done.returncode}: "
                                  f"{(done.stderr or done.stdout)[-1000:]}")
    return driver.parse(done.stdout)


def measure(configs: list[Config], route: Route, driver: drivers.Driver, *, connections: int,
            seconds: float, rounds: int, warmup: float) -> list[Measured]:
    server_cores, driver_cores = cores()
    results = [Measured(config) for config in configs]
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(booted(c, server_cores)) for c in configs]
        for url, _ in servers:
            if warmup:
                drive(driver, url, route, connections, warmup, driver_cores)
        for _ in range(rounds):
            for measured, (url, pid) in zip(results, servers, strict=True):
                before = tree_cpu_seconds(pid)
                load = drive(driver, url, route, connections, seconds, driver_cores)
                measured.rounds.append(Round(load, tree_cpu_seconds(pid) - before))
    return results


def measure_target(target: str, route: Route, driver: drivers.Driver, *, connections: int,
                   seconds: float, rounds: int, warmup: float) -> list[Measured]:
    """An existing server, named explicitly: load only (its CPU is not ours to read)."""
    measured = Measured(Config("target", "auto", target=target))
    if warmup:
        drive(driver, target.rstrip("/"), route, connections, warmup, None)
    for _ in range(rounds):
        load = drive(driver, target.rstrip("/"), route, connections, seconds, None)
        measured.rounds.append(Round(load, None))
    return [measured]
