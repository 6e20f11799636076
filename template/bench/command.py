"""`bench engines` on the command line: options in, a report and an exit code out."""

from __future__ import annotations

from pathlib import Path

import typer

from app.core import loops
from bench import drivers
from bench.model import configs_for
from bench.route import Route, RouteError, parse_pairs

# Click's plain help, as the project's command line (app/cli.py) gives it.
bench = typer.Typer(help="Measure the engines on a route of this app.", no_args_is_help=True,
                    rich_markup_mode=None)


@bench.command("engines", short_help="Boot each engine, load it alike, report what changes.")
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
    http: list[str] = typer.Option([], help="uvicorn parser (repeatable). Default auto."),
    driver: str = typer.Option("auto", help="auto (wrk, h2load, python), wrk, h2load, python, ab."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes of each server; "
                                "other settings come from the environment and .env."),
    connections: int = typer.Option(64, "-c", "--connections", min=1, help="Connections."),
    duration: float = typer.Option(5.0, "--duration", min=1, help="Seconds per round."),
    rounds: int = typer.Option(3, min=1, help="Rounds per configuration, interleaved."),
    warmup: float = typer.Option(2.0, min=0, help="Seconds of load before counting."),
    target: str | None = typer.Option(None, help="Measure this running server instead."),
    json_file: Path | None = typer.Option(None, "--json", help="Write every figure here."),
) -> None:
    """Boot each engine and drive identical load at it; report what the engine changes."""
    from bench import report

    try:
        body = payload_file.read_bytes() if payload_file else (payload or "").encode()
        route = Route(path, dict(parse_pairs(path_param, "=", "--path-param")), method.upper(),
                      tuple(parse_pairs(header, ":", "--header")), body)
        route.path  # noqa: B018 - refuse a bad template before booting anything
        chosen, skipped = drivers.choose(driver, route)
        configs = [] if target else configs_for(
            engine or list(loops.ENGINES), loop or [loops.AUTO], http or [loops.AUTO],
            skip_refused=not engine, workers=workers)
    except (RouteError, drivers.DriverError, ValueError, OSError) as error:
        typer.echo(f"Cannot bench: {error}", err=True)
        raise typer.Exit(2) from None
    failed = report.run_and_report(
        configs, route, chosen, skipped, connections=connections, seconds=duration,
        rounds=rounds, warmup=warmup, target=target, json_file=json_file,
    )
    raise typer.Exit(1 if failed else 0)


@bench.command("app", short_help="What this app's layers cost over bare FastAPI.")
def bench_app(
    path: str | None = typer.Option(
        None, help="A GET route of this app; default: /health/ and a user-like route."),
    path_param: list[str] = typer.Option([], help="NAME=VALUE for a {NAME} in --path."),
    header: list[str] = typer.Option([], help="'Name: value' (repeatable)."),
    duration: float = typer.Option(10.0, min=0.1, help="Seconds per route, variants in turn."),
) -> None:
    """What this app's layers cost over bare FastAPI, in-process: on /health/ and on a
    route shaped like yours (a router in app/routes/, a path parameter, a dependency)."""
    from bench import app_overhead, user_like

    try:
        cases = [(Route(path, dict(parse_pairs(path_param, "=", "--path-param")), "GET",
                        tuple(parse_pairs(header, ":", "--header"))), ())] if path else [
            (Route("/health/"), ()), (user_like.ROUTE, (user_like.router,))]
        for route, _ in cases:
            route.path  # noqa: B018 - refuse a bad template before measuring
        for route, extra_routers in cases:
            print_overhead(route, app_overhead.measure(route, duration, extra_routers))
    except (RouteError, ValueError) as error:
        typer.echo(f"Cannot bench: {error}", err=True)
        raise typer.Exit(2) from None


def print_overhead(route: Route, measured: list) -> None:
    from rich.console import Console
    from rich.table import Table

    from bench import app_overhead

    bare, rounds = measured[0], len(measured[0].slices_us)
    table = Table(title=f"In-process CPU per request on {route.method} {route.path_template} "
                        f"({rounds} rounds, medians)")
    for column in ("variant", "µs CPU/request", "vs bare FastAPI"):
        table.add_column(column)
    for variant in measured:
        table.add_row(variant.name, f"{variant.cost_us:.1f}", f"{variant.ratio_to(bare):.3f}x")
    Console().print(table)
    by_name = {variant.name: variant for variant in measured}
    without, stack = by_name[app_overhead.NO_MIDDLEWARE], by_name[app_overhead.ALL_MIDDLEWARE]
    typer.echo(f"The middleware alone: {stack.ratio_to(without):.3f}x {without.name!r}.")
