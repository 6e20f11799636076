"""`bench engines` on the command line: options in, a report and an exit code out."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import typer

from app.core import loops
from app.core.settings import served
from bench import drivers, harness, stats
from bench.model import Config, configs_for
from bench.route import Route, RouteError, parse_pairs

# Counted seconds of load per configuration (docs/benchmarks.md: repeatability).
DURATION = 30.0
# The route called in-process after the servers stop (app_cost.py: 1 s, imports and
# warm-up included), measured here at 1.5-2 s.
APP_COST_S = 2.0
# Click's plain help, as the project's command line (cli/main.py) gives it.
bench = typer.Typer(help="Measure the engines on a route of this app.", no_args_is_help=True,
                    rich_markup_mode=None)


@bench.command("engines", short_help="Boot each engine, load them in turn, compare.")
def bench_engines(
    path: str = typer.Option("/health/", help="Route; {name} parts come from --path-param."),
    path_param: list[str] = typer.Option([], help="NAME=VALUE for a {NAME} in --path."),
    method: str = typer.Option("GET", help="HTTP method."),
    payload: str | None = typer.Option(None, help="Request body."),
    payload_file: Path | None = typer.Option(None, help="Request body from a file."),
    header: list[str] = typer.Option([], help="'Name: value' (repeatable)."),
    engine: list[str] = typer.Option([], help="Engine to measure (repeatable; default all)."),
    loop: list[str] = typer.Option(
        [], help="Loop (repeatable); 'all' sweeps what the matrix allows here. Default auto."),
    http: list[str] = typer.Option(
        [], help="HTTP parser (repeatable), for the engines that take it. Default auto."),
    driver: str = typer.Option("auto", help="auto (wrk, h2load, python), wrk, h2load, python, ab."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes of each server; "
                                "other settings come from the environment and .env."),
    connections: int = typer.Option(64, "-c", "--connections", min=1, help="Connections."),
    duration: float = typer.Option(
        DURATION, "--duration", min=1,
        help="Seconds of load per configuration, in slices taken in turn."),
    slice_length: float | None = typer.Option(
        None, "--slice", min=0.2, show_default=False,
        help="Seconds per slice (default: from the warm-up, 1 s or more)."),
    warmup: float = typer.Option(2.0, min=0, help="Seconds of load before counting."),
    threshold: float = typer.Option(
        stats.THRESHOLD * 100, min=0, help="Percent within which two servers are "
        "called alike (no measurable difference)."),
    target: str | None = typer.Option(None, help="Measure this running server instead."),
    json_file: Path | None = typer.Option(None, "--json", help="Write every figure here."),
) -> None:
    """Boot each engine, load them in turn in short slices, and say, with 95 % confidence
    intervals, whether the engine changes requests/s and CPU per request on this route."""
    try:
        body = payload_file.read_bytes() if payload_file else (payload or "").encode()
        route = Route(path, dict(parse_pairs(path_param, "=", "--path-param")), method.upper(),
                      tuple(parse_pairs(header, ":", "--header")), body)
        route.path  # noqa: B018 - refuse a bad template before booting anything
        chosen, skipped = drivers.choose(driver, route)
        configs = [] if target else configs_for(
            engine or list(served()[0]), loop or [loops.AUTO], http or [loops.AUTO],
            skip_refused=not engine, workers=workers)
    except (RouteError, drivers.DriverError, ValueError, OSError) as error:
        typer.echo(f"Cannot bench: {error}", err=True)
        raise typer.Exit(2) from None
    options = {"connections": connections, "duration": duration, "slice_length": slice_length,
               "warmup": warmup}
    # A stop by SIGTERM unwinds like Ctrl-C, so the servers booted here are stopped too;
    # the handler is this run's alone (a test calling the bench in process keeps its own).
    with sigterm_unwinds():
        code = measure_and_report(route=route, chosen=chosen, skipped=skipped, configs=configs,
                                  target=target, options=options, threshold=threshold,
                                  json_file=json_file)
    raise typer.Exit(code)


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM unwinds the bench (the servers it booted are stopped on the way out),
    then is delivered again to the handler it had before: the process ends as the
    signal would have ended it. A caller that catches the unwinding (pytest running
    the bench in-process reports a SystemExit as a failed test) still stops."""
    received = False

    def unwind(*_: object) -> None:
        nonlocal received
        received = True
        sys.exit(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if received:
            signal.raise_signal(signal.SIGTERM)


def measure_and_report(*, route: Route, chosen: drivers.Driver, skipped: list[str],
                       configs: list[Config], target: str | None, options: dict[str, object],
                       threshold: float, json_file: Path | None) -> int:
    """Boot, measure, print the report (and the JSON file); the exit code."""
    from rich.console import Console

    from bench import report, verdict
    from bench.app_cost import app_cpu_us_per_request

    console = Console(width=max(Console().width, 140))
    console.print(f"driver: {chosen.name}" + (f" ({chosen.note})" if chosen.note else "")
                  + (f"; passed over: {'; '.join(skipped)}" if skipped else ""), highlight=False)
    app_cost = None
    started = time.monotonic()
    if target:
        run = harness.measure_target(target, route, chosen, **options)
    else:
        reference = reference_of(configs)
        assumed = harness.slice_seconds(chosen, options["slice_length"], [])  # type: ignore[arg-type]

        def announce(length: float, prefix: str) -> None:
            seconds = [harness.estimated_seconds(
                len(configs), duration=float(options["duration"]) * rounds,
                slice_seconds=length, warmup=float(options["warmup"])) + APP_COST_S
                for rounds in (1, 2)]  # up to twice the rounds when some are set aside
            console.print(f"{prefix}about {seconds[0]:.0f} s in all (about {seconds[1]:.0f} s "
                          "if every round is set aside and run again)", highlight=False)

        def calibrated(length: float) -> None:
            if length != assumed:
                announce(length, f"slices of {length:g} s (from the warm-up): ")

        announce(assumed, f"reference: {configs[reference].label}"
                 f"{reference_note(configs[reference])}; " if len(configs) > 1 else "")

        def in_all(progress: harness.Progress) -> float:
            """What the run now takes: what it took so far, the rounds left at the pace
            so far, the servers' stops and the route in-process."""
            return (time.monotonic() - started + progress.seconds_left
                    + len(configs) * harness.STOP_S + APP_COST_S)

        notices = harness.SetAsideNotices(
            say=lambda line: console.print(line, highlight=False), in_all=in_all)
        try:
            run = harness.measure(configs, route, chosen, **options, reference=reference,
                                  threshold=threshold / 100, calibrated=calibrated,
                                  progress=notices)
        except (RuntimeError, drivers.DriverError) as error:  # a server that did not start
            typer.echo(f"Cannot bench: {error}", err=True)
            raise typer.Exit(2) from None
        try:
            app_cost = app_cpu_us_per_request(route)
        except ValueError as error:  # the route fails in-process too: no share to report
            console.print(f"app alone: not measured ({error})")
    summary = verdict.summarize(run)
    sentences, notes = verdict.verdict(summary, route, app_cost), verdict.warnings(summary)
    report.render(console, summary, chosen, app_cost, sentences, notes)
    took = f"took {time.monotonic() - started:.0f} s"
    if not target:  # the estimate for the rounds this run took, to check it by
        expected = harness.estimated_seconds(
            len(configs), duration=len(run.rounds) * run.slice_seconds,
            slice_seconds=run.slice_seconds, warmup=float(options["warmup"])) + APP_COST_S
        took += f" for {len(run.rounds)} rounds (estimated for as many: about {expected:.0f} s)"
    console.print(took, highlight=False)
    if json_file:
        json_file.write_text(json.dumps(
            report.as_json(summary, route, chosen, app_cost, sentences, notes), indent=2))
    return 1 if any(run.failed(i) for i in range(len(run.configs))) else 0


def default_engine() -> str:
    from app.core.answers import ANSWERS

    return str(ANSWERS["default_engine"])


def reference_of(configs: list[Config]) -> int:
    """The first configuration on the project's default engine, else the first."""
    engines = [config.engine for config in configs]
    return engines.index(default_engine()) if default_engine() in engines else 0


def reference_note(config: Config) -> str:
    if config.engine == default_engine():
        return " (the project's default engine)"
    return " (the first configuration: the default engine is not measured)"


@bench.command("app", short_help="What this app's layers cost over bare FastAPI.")
def bench_app(
    path: str | None = typer.Option(
        None, help="A GET route of this app; default: /health/ and a user-like route."),
    path_param: list[str] = typer.Option([], help="NAME=VALUE for a {NAME} in --path."),
    header: list[str] = typer.Option([], help="'Name: value' (repeatable)."),
    duration: float = typer.Option(10.0, min=0.1, help="Seconds per route in-process, "
                                   "variants in turn."),
    ladder: bool = typer.Option(False, "--ladder", help="Rung by rung, from raw ASGI to the "
                                "app as served, in-process and through each engine."),
    engine: list[str] = typer.Option(
        [], help="With --ladder: engine to climb on (repeatable; default all; 'none': "
        "in-process only)."),
    rounds: int = typer.Option(6, min=1, help="With --ladder: rounds of 1 s slices per "
                               "engine (each rung one slice a round)."),
    warmup: float = typer.Option(1.0, min=0, help="With --ladder: seconds of load on each "
                                 "served rung before counting."),
    rung: list[str] = typer.Option(
        [], help="With --ladder: climb only the rungs whose name contains this, any case "
        "(repeatable), and the baseline 'bare FastAPI, same setup'. --rung 'as served': two "
        "rungs, a round of 2 s instead of about 15, so --rounds can be higher."),
) -> None:
    """What this app's layers cost over bare FastAPI set up as this app is, in-process:
    on /health/ and on a route shaped like yours (a router in app/routes/, a path
    parameter, a dependency). With --ladder, one layer at a time, also through each
    engine."""
    from bench import app_overhead, ladder_command, user_like
    from bench.ladder import Case

    try:
        cases = [Case(Route(path, dict(parse_pairs(path_param, "=", "--path-param")), "GET",
                            tuple(parse_pairs(header, ":", "--header"))))] if path else [
            Case(Route("/health/")), Case(user_like.ROUTE, user_like=True)]
        for case in cases:
            case.route.path  # noqa: B018 - refuse a bad template before measuring
        if engine and not ladder:
            raise ValueError("--engine chooses the engines of --ladder; add --ladder, or "
                             "use `bench engines` to compare engines.")
        if rung and not ladder:
            raise ValueError("--rung chooses rungs of --ladder; add --ladder.")
        engines = ladder_engines(engine)
        code = 0
        if ladder:
            with sigterm_unwinds():
                code = ladder_command.climb(cases, engines, duration=duration, rounds=rounds,
                                            warmup=warmup, only=rung)
        else:
            for case in cases:
                print_overhead(case.route,
                               app_overhead.measure(case.route, duration, case.extra_routers()))
    # RuntimeError: a rung's server that did not start.
    except (RouteError, ValueError, drivers.DriverError, RuntimeError) as error:
        typer.echo(f"Cannot bench: {error}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def ladder_engines(asked: list[str]) -> list[str]:
    if asked == ["none"]:
        return []
    unknown = [name for name in asked if name not in loops.ENGINES]
    if unknown:
        raise ValueError(f"unknown engine {unknown[0]!r}: choose from "
                         f"{', '.join(loops.ENGINES)}, or none.")
    return asked or list(served()[0])


def print_overhead(route: Route, measured: list) -> None:
    from rich.console import Console
    from rich.table import Table

    from bench import app_overhead

    bare, rounds = measured[0], len(measured[0].slices_us)
    table = Table(title=f"In-process CPU per request on {route.method} {route.path_template} "
                        f"({rounds} rounds, medians)")
    for column in ("variant", "µs CPU/request", "vs bare FastAPI, same setup"):
        table.add_column(column)
    for variant in measured:
        table.add_row(variant.name, f"{variant.cost_us:.1f}", f"{variant.ratio_to(bare):.3f}x")
    Console().print(table)
    by_name = {variant.name: variant for variant in measured}
    without, stack = by_name[app_overhead.NO_MIDDLEWARE], by_name[app_overhead.ALL_MIDDLEWARE]
    typer.echo(f"The middleware alone: {stack.ratio_to(without):.3f}x {without.name!r}.")
