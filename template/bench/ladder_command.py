"""`bench app --ladder`: climb the ladder (bench/ladder.py) on each route, in-process and
through each engine, and print each climb's table (bench/ladder_report.py).

Served, every rung of one route on one engine is booted at once and loaded in turn in
short slices, as `bench engines` does (harness.py). Rounds go on until each rung has
`--rounds` pairs with the baseline and with the rung below, or twice as many rounds were
run. The figure is the server's CPU time per request, from /proc, which moves far less
with the machine than requests/s does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from rich.console import Console

from app.core import loops
from bench import app_overhead, drivers, frameworks, harness, ladder, ladder_report
from bench.ladder import SAME_SETUP, Case
from bench.model import Config

CONNECTIONS = 64
# Building every rung's app and warming each up in-process, measured here at 1-2 s
# for a route's 14 rungs.
IN_PROCESS_EXTRA_S = 1.5


class Climb(NamedTuple):
    """One climb of the command: a route (its index) in-process, or through an engine."""

    route: int
    rung_count: int
    engine: str | None  # None: in-process


def plan(rung_counts: Sequence[int], engines: Sequence[str]) -> list[Climb]:
    """The climbs in the order they run: each route in-process, then through each engine."""
    return [climb for route, count in enumerate(rung_counts)
            for climb in [Climb(route, count, None),
                          *(Climb(route, count, engine) for engine in engines)]]


def estimate(climbs: Sequence[Climb], *, duration: float, rounds: int, slice_seconds: float,
             warmup: float, stretch: float = 1.0) -> float:
    """Seconds the climbs take; `stretch`: their rounds over the rounds asked for (rounds
    set aside are run again, up to twice as many)."""
    return sum(duration + IN_PROCESS_EXTRA_S if climb.engine is None
               else harness.estimated_seconds(climb.rung_count,
                                              duration=stretch * rounds * slice_seconds,
                                              slice_seconds=slice_seconds, warmup=warmup)
               for climb in climbs)


def climb_in_process(console: Console, case: Case, duration: float,
                     only: Sequence[str] = ()) -> None:
    app_overhead.use_multiprocess_metrics()  # the metrics written as a served worker does
    rungs = ladder.rungs(case, only=only)
    names = [rung.name for rung in rungs]
    variants = [app_overhead.Variant(rung.name, rung.build()) for rung in rungs]
    app_overhead.rotate(variants, case.route, duration)
    rounds = [[variant.slices_us[number] for variant in variants]
              for number in range(len(variants[0].slices_us))]
    rows = ladder_report.figures(names, rounds, names.index(SAME_SETUP))
    ladder_report.print_ladder(
        console, f"in-process (no server): CPU µs per request on {route_text(case)}, "
        f"{len(rounds)} rounds{medians(only)}", rows, SAME_SETUP)


def climb_served(console: Console, case: Case, engine: str, driver: drivers.Driver, *,
                 rounds: int, slice_seconds: float, warmup: float, only: Sequence[str] = (),
                 in_all: Callable[[harness.Progress], float] | None = None) -> tuple[int, float]:
    """One engine's climb: the number of requests that failed or were not 2xx, and the
    seconds estimated for the rounds it took (to check the estimate by). With `in_all`
    (what the whole command now takes), slices set aside are told as they happen."""
    names = [rung.name for rung in ladder.rungs(case, only=only)]
    reference = names.index(SAME_SETUP)
    label = Config(engine, loops.AUTO).label
    notices = harness.SetAsideNotices(
        say=lambda line: console.print(line, highlight=False), in_all=in_all, per_slice=True,
        prefix=f"{label} on {route_text(case)}: ") if in_all else None
    run = harness.measure(ladder.served_configs(case, engine, names), case.route, driver,
                          connections=CONNECTIONS, duration=rounds * slice_seconds,
                          slice_length=slice_seconds, warmup=warmup, reference=reference,
                          counted=ladder_report.pairs_counted, progress=notices)
    rows = ladder_report.figures(names, ladder_report.served_rounds(run), reference)
    busy = [ladder_report.core_busy(run, index) for index in range(len(names))]
    kept, slices = ladder_report.slices_kept(run)
    ladder_report.print_ladder(
        console, f"{label}: server CPU µs per request on {route_text(case)}, "
        f"{len(run.rounds)} rounds, {kept} of {slices} slices kept, {slice_seconds:g} s slices, "
        f"{driver.name} -c{CONNECTIONS}{medians(only)}", rows, SAME_SETUP, busy)
    failed = sum(run.failed(index) for index in range(len(names)))
    if failed:
        console.print(f"[red]{failed} requests failed or were not 2xx.[/red]")
    if not kept:
        console.print("Every slice was set aside: a core was taken away in each (steal time "
                      "or other processes); nothing can be said until the machine is quieter.")
    return failed, harness.estimated_seconds(
        len(names), duration=len(run.rounds) * slice_seconds, slice_seconds=slice_seconds,
        warmup=warmup)


def medians(only: Sequence[str]) -> str:
    """A table title's end. With --rung the row below a rung may be several changes
    below it, and its step says what they cost together."""
    return "; medians (95 % CI)" + ("; --rung: each step is over the row above" if only
                                   else "")


def route_text(case: Case) -> str:
    return f"GET {case.route.path_template}"


def climb(cases: Sequence[Case], engines: Sequence[str], *, duration: float, rounds: int,
          warmup: float, only: Sequence[str] = ()) -> int:
    """Every case in-process, then through each engine; the exit code. `only`: the
    rungs to climb (ladder.chosen), every one by default."""
    console = Console(width=max(Console().width, 140))
    case_drivers = [drivers.choose("auto", case.route)[0] for case in cases]
    slice_seconds = harness.slice_seconds(case_drivers[0], None, [])
    counts = [len(ladder.rungs(case, only=only)) for case in cases]  # refuses a name first
    climbs = plan(counts, engines)

    def seconds_of(some: Sequence[Climb], stretch: float = 1.0) -> float:
        return estimate(some, duration=duration, rounds=rounds, slice_seconds=slice_seconds,
                        warmup=warmup, stretch=stretch)

    expected, most = seconds_of(climbs), seconds_of(climbs, stretch=2)
    console.print(f"ladder: {' and '.join(route_text(case) for case in cases)}; "
                  f"{'/'.join(str(count) for count in counts)} rungs, in-process and on "
                  f"{', '.join(engines) or 'no engine'}; about {expected:.0f} s (about "
                  f"{most:.0f} s if every slice is set aside and run again)", highlight=False)
    for note in frameworks.missing():
        console.print(note, highlight=False)
    started, failed = time.monotonic(), 0
    as_run = len(cases) * (duration + IN_PROCESS_EXTRA_S)  # the estimate for the rounds run
    for number, climb in enumerate(climbs):
        case = cases[climb.route]
        if climb.engine is None:
            climb_in_process(console, case, duration, only)
            continue

        def in_all(progress: harness.Progress, this: Climb = climb,
                   later: Sequence[Climb] = climbs[number + 1:]) -> float:
            """What the command now takes: what it took so far, this climb's rounds left
            at its pace and its servers' stops, and the climbs after it with their
            rounds stretched as this one's are."""
            return (time.monotonic() - started + progress.seconds_left
                    + this.rung_count * harness.STOP_S
                    + seconds_of(later, stretch=progress.stretch))

        failures, seconds = climb_served(console, case, climb.engine, case_drivers[climb.route],
                                         rounds=rounds, slice_seconds=slice_seconds,
                                         warmup=warmup, only=only, in_all=in_all)
        failed, as_run = failed + failures, as_run + seconds
    console.print(f"took {time.monotonic() - started:.0f} s (announced about {expected:.0f} s; "
                  f"estimated for the rounds run: about {as_run:.0f} s)", highlight=False)
    return 1 if failed else 0
