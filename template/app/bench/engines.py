"""Boot each engine configuration, load each the same way, and say what it means.

Fairness: every server is booted once through the project's launcher (reload off),
warmed up, then measured in interleaved rounds (A B A B ...); medians with min-max
are reported. On a machine with two or more cores the servers are pinned to core 0
and the driver to the others. Server CPU per request (user + system time of the
server's process tree over the counted window, divided by the responses) is the
figure that stays steady on a noisy machine; requests/s is only meaningful when
the server kept its core busy, which the saturation check reports.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.bench import drivers
from app.bench.process_cpu import tree_cpu_seconds
from app.bench.route import Route
from app.core import loops

SATURATED = 0.85  # share of the server's core below which rates are only a floor
SERVER_CORE = 0


@dataclass(frozen=True)
class Config:
    engine: str
    loop: str
    http: str = loops.AUTO
    workers: int = 1

    @property
    def label(self) -> str:
        parser = loops.resolve_http(self.engine, self.http)
        workers = f" / {self.workers} workers" if self.workers > 1 else ""
        return f"{self.engine} / {loops.resolve(self.engine, self.loop)} / {parser}{workers}"


@dataclass
class Round:
    load: drivers.LoadResult
    server_cpu_s: float | None

    @property
    def cpu_us_per_request(self) -> float | None:
        if self.server_cpu_s is None or not self.load.requests:
            return None
        return self.server_cpu_s / self.load.requests * 1e6

    @property
    def core_busy(self) -> float | None:
        return None if self.server_cpu_s is None else self.server_cpu_s / self.load.seconds

    def figure(self, name: str) -> float | None:
        """A figure of this round by name: its own, or its load result's."""
        source = self if name in ("cpu_us_per_request", "core_busy") else self.load
        return getattr(source, name)


@dataclass
class Measured:
    config: Config
    rounds: list[Round] = field(default_factory=list)

    def median(self, figure: str) -> float | None:
        values = [v for r in self.rounds if (v := r.figure(figure)) is not None]
        return statistics.median(values) if values else None

    def spread(self, figure: str) -> tuple[float, float] | None:
        values = [v for r in self.rounds if (v := r.figure(figure)) is not None]
        return (min(values), max(values)) if values else None

    @property
    def failed(self) -> int:
        return sum(r.load.failed + r.load.non_2xx for r in self.rounds)

    @property
    def saturated(self) -> bool | None:
        busy = self.median("core_busy")
        return None if busy is None else busy >= SATURATED


def configs_for(engines: list[str], loop_names: list[str], parsers: list[str],
                skip_refused: bool = False, workers: int = 1) -> list[Config]:
    """Every asked-for engine x loop x parser the matrix allows on this Python.

    With `skip_refused` (no engine named), a loop only some engines run is measured on
    those; otherwise a refused pair stops the bench with the matrix's sentence.
    """
    python = loops.python_version()
    chosen = []
    for engine in engines:
        allowed = [name for name in loops.engine_loops(engine, python)
                   if name == loops.AUTO or loops.is_installed(name)]
        wanted = allowed[1:] if loop_names == ["all"] else loop_names
        for loop in wanted:
            reason = loops.availability_refusal(engine, loop)
            if reason and skip_refused and loops.refusal_reason(engine, loop, python):
                continue
            if reason:
                raise ValueError(reason)
            for http in parsers if loops.ENGINE_SPECS[engine].parser_choice else [loops.AUTO]:
                reason = loops.http_availability_refusal(engine, http)
                if reason:
                    raise ValueError(reason)
                config = Config(engine, loop, http, workers)
                if config not in chosen:
                    chosen.append(config)
    if not chosen:
        raise ValueError(f"no engine runs {', '.join(loop_names)} on this Python; "
                         f"`engines` lists what each accepts.")
    return chosen


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
    measured = Measured(Config("target", loops.AUTO))
    if warmup:
        drive(driver, target.rstrip("/"), route, connections, warmup, None)
    for _ in range(rounds):
        load = drive(driver, target.rstrip("/"), route, connections, seconds, None)
        measured.rounds.append(Round(load, None))
    return [measured]


def verdict(results: list[Measured], route: Route, app_cost_us: float | None) -> str:
    """One sentence: how far apart the engines are here, and what share is the server's."""
    ranked = sorted((m for m in results if m.median("requests_per_second")),
                    key=lambda m: m.median("requests_per_second") or 0, reverse=True)
    if not ranked:
        return "No configuration answered."
    unsaturated = [m.config.label for m in ranked if m.saturated is False]
    floor = (f" The driver could not saturate the server for {', '.join(unsaturated)} (its "
             "core was not kept busy: the driver or the route's own waiting capped the rate); "
             "these numbers are a floor, and CPU µs per request is the figure to compare."
             if unsaturated else "")
    if len(ranked) < 2:
        return f"{ranked[0].config.label}: {ranked[0].median('requests_per_second'):,.0f} "\
               f"requests/s on {route.path}.{floor}"
    best, worst = ranked[0], ranked[-1]
    ratio = (best.median("requests_per_second") or 0) / (worst.median("requests_per_second") or 1)
    sentence = f"{best.config.label} is {ratio:.2f}x {worst.config.label} on {route.path}"
    best_cpu, worst_cpu = best.median("cpu_us_per_request"), worst.median("cpu_us_per_request")
    if app_cost_us and best_cpu and worst_cpu:
        share = max(0.0, worst_cpu - app_cost_us) / worst_cpu
        saved = worst_cpu - best_cpu
        sentence += (
            f"; the server is {share:.0%} of this route's cost "
            f"({worst_cpu:.1f} µs CPU per request, {app_cost_us:.1f} of them the app's own); "
            f"switching saves at most {abs(saved):.1f} µs of {worst_cpu:.1f} per request"
        )
    return sentence + "." + floor
