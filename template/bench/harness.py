"""Boot every configuration at once, then load them in turn, in short slices.

Every server is booted once through the project's launcher (reload off) and warmed up;
then each round gives every server one slice of load, back to back, the first of the
round rotating (A B, B A, ...). Slices are short (wrk's shortest by default), so the
machine's speed barely changes within a round. A round in which the server's or the
driver's core was taken away (machine.py) is set aside and another run, up to as many
again as asked for. With two or more cores, the servers are pinned to the first core.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import drivers, machine
from bench.model import Config, Round, Run, Slice
from bench.route import Route

# Seconds a run spends beside its load, for the time it announces (docs/benchmarks.md):
# a server's boot and stop, and the driver's start and /proc reads around each slice.
BOOT_S = 1.5
STOP_S = 1.0
SLICE_EXTRA_S = 0.05


def estimated_seconds(servers: int, *, duration: float, slice_seconds: float,
                      warmup: float) -> float:
    """How long `measure` takes when no round is set aside."""
    rounds = max(1, round(duration / slice_seconds))
    per_server = (BOOT_S + STOP_S + (warmup + SLICE_EXTRA_S if warmup else 0)
                  + rounds * (slice_seconds + SLICE_EXTRA_S))
    return servers * per_server


def cores() -> tuple[set[int] | None, set[int] | None]:
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return {available[0]}, set(available[1:])


def _pinned(core_set: set[int] | None):  # a subprocess preexec_fn, or None
    return (lambda: os.sched_setaffinity(0, core_set)) if core_set else None


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each is held while the next is picked (picked one
    at a time, the app and its metrics listener were once given the same one)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def answers(url: str, headers: tuple[tuple[str, str], ...] = ()) -> bool:
    # urllib, not httpx: `bench engines` runs from a production install too.
    try:
        request = urllib.request.Request(url, headers=dict(headers))
        with urllib.request.urlopen(request, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def booted(config: Config, server_cores: set[int] | None) -> Iterator[tuple[str, int]]:
    """The project's own launcher on a free port; yields (base URL, pid)."""
    port, metrics_port = _free_ports(2)
    launch = config.launch()
    env = {**os.environ, "WEBSERVER_RELOAD": "false", "WEBSERVER_WORKERS": str(config.workers),
           "WEBSERVER_HTTP2": "false", "WEBSERVER_LOG_LEVEL": "warning",
           # Servers are up together: each its own metrics listener (docs/observability.md).
           "WEBSERVER_METRICS_PORT": str(metrics_port), **dict(launch.env)}
    argv = [sys.executable, "-m", launch.module, "serve", "--engine", config.engine, "--loop",
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
            if answers(url + launch.ready.path, launch.ready.headers):
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


def slice_seconds(driver: drivers.Driver, asked: float | None,
                  warm: list[Slice]) -> float:
    """The slice length: as asked, or calibrated from the warm-up (as pyperf sizes its
    loops): at least 1 s, long enough for 1,000 responses and for 50 ticks of the
    server's CPU clock (so one tick is a small error on a slice's CPU per request), at
    most 5 s. Whole seconds for drivers that take no fractions (wrk, h2load, ab)."""
    if asked is None:
        asked = 1.0
        for warmed in (w for w in warm if not w.set_aside):  # a shared core would mislead
            rate, busy = warmed.requests_per_second, warmed.core_busy
            if rate:
                asked = max(asked, 1000 / rate)
            if busy:
                asked = max(asked, 50 / machine.TICKS / busy)
        asked = min(asked, 5.0)
    return float(math.ceil(asked)) if driver.whole_seconds else asked


def load_slice(driver: drivers.Driver, url: str, pid: int | None, route: Route,
               connections: int, seconds: float, server_cores: set[int] | None,
               driver_cores: set[int] | None) -> Slice:
    """One slice of load, with the server's CPU time and how the cores were spent."""
    pinned = server_cores is not None and driver_cores is not None
    watched = [server_cores, driver_cores] if pinned else [None]
    before = [machine.core_times(cores) for cores in watched]
    cpu_before = machine.tree_cpu_seconds(pid) if pid else None
    driver_before = machine.children_cpu_seconds()
    load = drive(driver, url, route, connections, seconds, driver_cores)
    driver_cpu = machine.children_cpu_seconds() - driver_before
    server_cpu = machine.tree_cpu_seconds(pid) - cpu_before if pid and cpu_before is not None \
        else None
    after = [machine.core_times(cores) for cores in watched]
    deltas = [a - b for a, b in zip(after, before, strict=True)]
    if server_cpu is None:  # a target: its CPU is not ours to read
        return Slice(load, None)
    if pinned:
        server = machine.shares(deltas[0], len(server_cores), server_cpu)
        driven = machine.shares(deltas[1], len(driver_cores), driver_cpu)
    else:  # one core for both: whatever is not theirs was taken from them
        server = driven = machine.shares(deltas[0], len(os.sched_getaffinity(0)),
                                         server_cpu + driver_cpu)
    reason = machine.taken_from_server(server) or (
        machine.taken_from_driver(driven) if pinned else None)
    return Slice(load, server_cpu, server, driven if pinned else None, reason)


def measure(configs: list[Config], route: Route, driver: drivers.Driver, *, connections: int,
            duration: float, slice_length: float | None, warmup: float,
            reference: int = 0, threshold: float | None = None,
            calibrated: Callable[[float], None] | None = None,
            counted: Callable[[Run], int] | None = None,
            progress: Callable[[Progress], None] | None = None) -> Run:
    """Every configuration booted at once, loaded in rotating rounds of short slices,
    until `duration` seconds of kept slices each (or twice as many rounds were run).
    `calibrated` is told the slice length once the warm-up has set it; `counted(run)`
    is how many rounds count so far (default: the rounds kept whole); `progress` is
    told where the rounds stand after each one (run_rounds)."""
    server_cores, driver_cores = cores()
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(booted(c, server_cores)) for c in configs]
        warm = [load_slice(driver, url, pid, route, connections, warmup, server_cores,
                           driver_cores) for url, pid in servers] if warmup else []
        length = slice_seconds(driver, slice_length, warm)
        if calibrated:
            calibrated(length)
        run = Run(configs, reference, length, duration)
        if threshold is not None:
            run.threshold = threshold

        def take_slice(index: int) -> Slice:
            url, pid = servers[index]
            return load_slice(driver, url, pid, route, connections, length, server_cores,
                              driver_cores)

        run_rounds(run, wanted=max(1, round(duration / length)), take_slice=take_slice,
                   counted=counted or rounds_kept, progress=progress)
    return run


def rounds_kept(run: Run) -> int:
    return len(run.kept)


def run_rounds(run: Run, *, wanted: int, take_slice: Callable[[int], Slice],
               counted: Callable[[Run], int] = rounds_kept,
               progress: Callable[[Progress], None] | None = None,
               clock: Callable[[], float] = time.monotonic) -> None:
    """Rounds of one slice per configuration (`take_slice(index)`), until `counted(run)`
    reaches `wanted` or twice `wanted` rounds were run; after each round `progress` is
    told where they stand, timed by `clock`."""
    most = 2 * wanted
    started = clock()
    while counted(run) < wanted and len(run.rounds) < most:
        # A round set aside is run again in the same order, so the kept rounds give
        # each configuration each place equally (the first slice of a round differs).
        turn = len(run.kept) % len(run.configs)
        this = Round([*range(turn, len(run.configs)), *range(turn)])
        for index in this.order:
            this.slices[index] = take_slice(index)
        run.rounds.append(this)
        if progress:
            progress(Progress.of(run, counted=counted(run), wanted=wanted, most=most,
                                 seconds_taken=clock() - started))


@dataclass(frozen=True)
class Progress:
    """Where a run's rounds stand, and what the rest takes at the pace measured so far."""

    rounds: int
    rounds_set_aside: int
    slices: int
    slices_set_aside: int
    taken_from: frozenset[str]  # whose cores were taken away: "server", "driver"
    counted: int  # rounds that count towards `wanted` (kept whole, or the ladder's pairs)
    wanted: int
    most: int  # the cap: rounds set aside are run again up to this many rounds in all
    seconds_taken: float  # by the rounds so far

    @classmethod
    def of(cls, run: Run, *, counted: int, wanted: int, most: int,
           seconds_taken: float) -> Progress:
        pieces = [piece for this in run.rounds for piece in this.slices.values()]
        reasons = [piece.set_aside for piece in pieces if piece.set_aside]
        return cls(rounds=len(run.rounds), rounds_set_aside=len(run.rounds) - len(run.kept),
                   slices=len(pieces), slices_set_aside=len(reasons),
                   taken_from=frozenset(reason.split(" ", 1)[0] for reason in reasons),
                   counted=counted, wanted=wanted, most=most, seconds_taken=seconds_taken)

    @property
    def seconds_per_round(self) -> float:
        return self.seconds_taken / self.rounds if self.rounds else 0.0

    @property
    def rounds_left(self) -> int:
        """Rounds still to run if rounds count as often as they have so far, within the
        cap; the whole cap while none has counted yet."""
        if self.counted >= self.wanted or self.rounds >= self.most:
            return 0
        if not self.counted:
            return self.most - self.rounds
        needed = math.ceil((self.wanted - self.counted) * self.rounds / self.counted)
        return min(needed, self.most - self.rounds)

    @property
    def seconds_left(self) -> float:
        return self.rounds_left * self.seconds_per_round

    @property
    def stretch(self) -> float:
        """The rounds this run is now expected to take, over the rounds it wanted."""
        return (self.rounds + self.rounds_left) / self.wanted


# After the first notice of rounds set aside, the next one waits this long (and for
# more set aside): a few lines on a busy machine, not one a round.
NOTICE_EVERY_S = 20.0


class SetAsideNotices:
    """A `progress` hook that says, while the rounds run, that some are being set aside
    and how long the whole run now takes (`in_all(progress)`, in seconds): at the first
    set aside, then at most every NOTICE_EVERY_S seconds. `per_slice`: count slices
    (the ladder leaves out slices, not whole rounds)."""

    def __init__(self, say: Callable[[str], None], in_all: Callable[[Progress], float], *,
                 per_slice: bool = False, prefix: str = "") -> None:
        self.say, self.in_all, self.per_slice, self.prefix = say, in_all, per_slice, prefix
        self.said_at: float | None = None
        self.said_set_aside = 0

    def __call__(self, progress: Progress) -> None:
        set_aside = progress.slices_set_aside if self.per_slice else progress.rounds_set_aside
        if set_aside <= self.said_set_aside or not progress.rounds_left:
            return  # nothing new, or the last round: the report follows at once
        if self.said_at is not None and progress.seconds_taken - self.said_at < NOTICE_EVERY_S:
            return
        self.said_at, self.said_set_aside = progress.seconds_taken, set_aside
        self.say(self.prefix + notice_text(progress, self.in_all(progress),
                                           per_slice=self.per_slice))


def notice_text(progress: Progress, in_all_seconds: float, *, per_slice: bool = False) -> str:
    """'3 of 8 rounds so far set aside (the server's core was taken away); now about
    190 s in all'."""
    set_aside, of, unit = ((progress.slices_set_aside, progress.slices, "slice") if per_slice
                           else (progress.rounds_set_aside, progress.rounds, "round"))
    counts = f"{set_aside} of {of} {unit}{'' if of == 1 else 's'}"
    whose = {frozenset({"server"}): "the server's core was",
             frozenset({"driver"}): "the driver's cores were"}.get(
        progress.taken_from, "the server's or the driver's core was")
    return (f"{counts} so far set aside ({whose} taken away); now about "
            f"{in_all_seconds:.0f} s in all")


def measure_target(target: str, route: Route, driver: drivers.Driver, *, connections: int,
                   duration: float, slice_length: float | None, warmup: float) -> Run:
    """An existing server, named explicitly: load only (its CPU is not ours to read)."""
    url = target.rstrip("/")
    warm = [load_slice(driver, url, None, route, connections, warmup, None, None)] \
        if warmup else []
    length = slice_seconds(driver, slice_length, warm)
    run = Run([Config("target", "auto", target=target)], 0, length, duration)
    for _ in range(max(1, round(duration / length))):
        run.rounds.append(Round([0], {0: load_slice(driver, url, None, route, connections,
                                                     length, None, None)}))
    return run
