"""The project's command line: `serve`, `engines` and `bench`."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.table import Table

from app.bench import command as bench_command
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
        refuse(str(error))
    try:
        address = server.listen_address(settings.host, settings.port)
    except server.ListenError as error:
        refuse(str(error))
    server.serve(settings.model_copy(update={"host": address}))


def refuse(sentence: str) -> NoReturn:
    typer.echo(f"Cannot start: {sentence}", err=True)
    raise typer.Exit(2)


cli.add_typer(bench_command.bench, name="bench")


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
