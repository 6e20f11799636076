"""The project's command line: `serve` and `engines`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from app.bench import drivers
from app.bench.engines import configs_for
from app.bench.route import Route, RouteError, parse_pairs
from app.core import loops, matrix_markdown
from app.core.config import PROJECT_SLUG, SettingsError, load_settings

cli = typer.Typer(
    name=PROJECT_SLUG,
    help=f"{PROJECT_SLUG}: serve the app on the engine and loop of your choice.",
    no_args_is_help=True,
    add_completion=False,
)


@cli.command()
def serve(
    engine: str | None = typer.Option(
        None, help=f"ASGI server: {', '.join(loops.ENGINES)} [env WEBSERVER_ENGINE]."
    ),
    loop: str | None = typer.Option(
        None,
        help=f"Event loop: {', '.join(loops.LOOP_POLICIES)}; `{PROJECT_SLUG} engines` "
        "shows what each engine accepts here [env WEBSERVER_LOOP].",
    ),
    http: str | None = typer.Option(
        None,
        help=f"uvicorn's HTTP parser: {', '.join(loops.HTTP_POLICIES)} [env WEBSERVER_HTTP].",
    ),
    http2: bool | None = typer.Option(
        None, "--http2/--no-http2", help="Also answer cleartext HTTP/2 [env WEBSERVER_HTTP2]."
    ),
    host: str | None = typer.Option(None, help="Bind address [env WEBSERVER_HOST]."),
    port: int | None = typer.Option(None, help="Port [env WEBSERVER_PORT]."),
    workers: int | None = typer.Option(None, help="Worker processes [env WEBSERVER_WORKERS]."),
    reload: bool | None = typer.Option(
        None, "--reload/--no-reload", help="Restart on code changes [env WEBSERVER_RELOAD]."
    ),
    log_level: str | None = typer.Option(None, help="Log level [env WEBSERVER_LOG_LEVEL]."),
) -> None:
    """Start the web server. Flags override the environment and .env for this run."""
    from app.core import server

    try:
        settings = load_settings(
            engine=engine,
            loop=loop,
            http=http,
            http2=http2,
            host=host,
            port=port,
            workers=workers,
            reload=reload,
            log_level=log_level,
        )
    except SettingsError as error:
        typer.echo(f"Cannot start: {error}", err=True)
        raise typer.Exit(2) from None
    server.serve(settings)


bench = typer.Typer(help="Measure the engines on a route of this app.", no_args_is_help=True)
cli.add_typer(bench, name="bench")


@bench.command("engines")
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
    connections: int = typer.Option(64, "-c", "--connections", min=1, help="Connections."),
    duration: float = typer.Option(5.0, "--duration", min=1, help="Seconds per round."),
    rounds: int = typer.Option(3, min=1, help="Rounds per configuration, interleaved."),
    warmup: float = typer.Option(2.0, min=0, help="Seconds of load before counting."),
    target: str | None = typer.Option(None, help="Measure this running server instead."),
    json_file: Path | None = typer.Option(None, "--json", help="Write every figure here."),
) -> None:
    """Boot each engine and drive identical load at it; report what the engine changes."""
    from app.bench import report

    try:
        body = payload_file.read_bytes() if payload_file else (payload or "").encode()
        route = Route(path, dict(parse_pairs(path_param, "=", "--path-param")), method.upper(),
                      tuple(parse_pairs(header, ":", "--header")), body)
        route.path  # noqa: B018 - refuse a bad template before booting anything
        chosen, skipped = drivers.choose(driver, route)
        configs = [] if target else configs_for(
            engine or list(loops.ENGINES), loop or [loops.AUTO], http or [loops.AUTO],
            skip_refused=not engine)
    except (RouteError, drivers.DriverError, ValueError, OSError) as error:
        typer.echo(f"Cannot bench: {error}", err=True)
        raise typer.Exit(2) from None
    failed = report.run_and_report(
        configs, route, chosen, skipped, connections=connections, seconds=duration,
        rounds=rounds, warmup=warmup, target=target, json_file=json_file,
    )
    raise typer.Exit(1 if failed else 0)


@cli.command()
def engines(
    markdown: bool = typer.Option(
        False, "--markdown", help="Print the whole matrix, every Python, as Markdown."
    ),
) -> None:
    """Show which loops each engine runs on this Python, and what `auto` picks."""
    if markdown:
        typer.echo(matrix_markdown.tables(), nl=False)
        return
    python = loops.python_version()
    table = Table(title=f"Engines and loops on Python {loops.version_text(python)}")
    for column in ("engine", "loop", "verdict", "installed"):
        table.add_column(column)
    for engine in loops.ENGINES:
        for name in loops.LOOPS:
            reason = loops.refusal(engine, name, python)
            verdict = "accepted" if reason is None else f"refused: {reason}"
            installed = "yes" if loops.is_installed(name) else "no"
            table.add_row(engine, name, verdict, installed)
        auto = loops.resolve(engine, loops.AUTO, python)
        table.add_row(engine, loops.AUTO, f"resolves to {auto}", "")
    Console().print(table)

    parsers = Table(title="HTTP parsers (WEBSERVER_HTTP)")
    for column in ("engine", "parser", "HTTP/2", "verdict", "installed"):
        parsers.add_column(column)
    for engine in loops.ENGINES:
        for name, spec in loops.HTTP_PARSERS.items():
            reason = loops.http_refusal(engine, name)
            verdict = "accepted" if reason is None else f"refused: {reason}"
            installed = "yes" if loops.importable(spec.module) else "no"
            parsers.add_row(engine, name, "yes" if spec.http2 else "no", verdict, installed)
        auto = loops.resolve_http(engine)
        parsers.add_row(engine, loops.AUTO, "", f"resolves to {auto}", "")
    Console().print(parsers)
