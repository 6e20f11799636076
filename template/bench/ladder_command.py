"""`bench app --ladder`: climb the ladder (bench/ladder.py) on each route, in-process and
through each engine, and print each climb's table (bench/ladder_report.py).

Served, every rung of one route on one engine is booted at once and loaded in turn in
1 s slices (wrk's shortest), the first of each round rotating, as `bench engines` does
(harness.py: servers pinned to the first core and the driver to the others). A slice
in which a core was taken away is left out with the pairs it belongs to, and rounds go
on until each rung has `--rounds` pairs with the baseline and with the rung below, or
twice as many rounds were run (ladder_report.py). The figure
is the server's CPU µs per request, from /proc, which moves far less with the machine
than requests/s does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console

from app.core import loops
from bench import app_overhead, drivers, harness, ladder, ladder_report
from bench.ladder import SAME_SETUP, Case
from bench.model import Config

CONNECTIONS = 64
# Building every rung's app and warming each up in-process, measured here at 1-2 s
# for a route's 14 rungs.
IN_PROCESS_EXTRA_S = 1.5


def estimate(cases: Sequence[Case], rung_counts: Sequence[int], engines: Sequence[str], *,
             duration: float, rounds: int, slice_seconds: float,
             warmup: float) -> tuple[float, float]:
    """Seconds the climb takes with no round set aside, and at most."""
    in_process = len(cases) * (duration + IN_PROCESS_EXTRA_S)
    return tuple(  # type: ignore[return-value]
        in_process + sum(harness.estimated_seconds(
            count, duration=times * rounds * slice_seconds, slice_seconds=slice_seconds,
            warmup=warmup) for count in rung_counts) * len(engines)
        for times in (1, 2))


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
                 rounds: int, slice_seconds: float, warmup: float,
                 only: Sequence[str] = ()) -> tuple[int, float]:
    """One engine's climb: the number of requests that failed or were not 2xx, and the
    seconds estimated for the rounds it took (to check the estimate by)."""
    names = [rung.name for rung in ladder.rungs(case, only=only)]
    reference = names.index(SAME_SETUP)
    run = harness.measure(ladder.served_configs(case, engine, names), case.route, driver,
                          connections=CONNECTIONS, duration=rounds * slice_seconds,
                          slice_length=slice_seconds, warmup=warmup, reference=reference,
                          enough=ladder_report.pairs_suffice)
    rows = ladder_report.figures(names, ladder_report.served_rounds(run), reference)
    busy = [ladder_report.core_busy(run, index) for index in range(len(names))]
    label = Config(engine, loops.AUTO).label
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
    expected, most = estimate(cases, counts, engines, duration=duration, rounds=rounds,
                              slice_seconds=slice_seconds, warmup=warmup)
    console.print(f"ladder: {' and '.join(route_text(case) for case in cases)}; "
                  f"{'/'.join(str(count) for count in counts)} rungs, in-process and on "
                  f"{', '.join(engines) or 'no engine'}; about {expected:.0f} s (about "
                  f"{most:.0f} s if every slice is set aside and run again)", highlight=False)
    started, failed = time.monotonic(), 0
    as_run = len(cases) * (duration + IN_PROCESS_EXTRA_S)  # the estimate for the rounds run
    for case, driver in zip(cases, case_drivers, strict=True):
        climb_in_process(console, case, duration, only)
        for engine in engines:
            failures, seconds = climb_served(console, case, engine, driver, rounds=rounds,
                                             slice_seconds=slice_seconds, warmup=warmup,
                                             only=only)
            failed, as_run = failed + failures, as_run + seconds
    console.print(f"took {time.monotonic() - started:.0f} s (announced about {expected:.0f} s; "
                  f"estimated for the rounds run: about {as_run:.0f} s)", highlight=False)
    return 1 if failed else 0
