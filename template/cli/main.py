"""The project's command line: `serve`, `reload`, `engines` and `bench`."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from app.core import framework, loops, matrix_markdown, tracing
from app.core.setting_specs import SettingSpec
from app.core.settings import (
    PROJECT_SLUG,
    SETTINGS,
    SettingsError,
    env_file,
    load_settings,
    overridden_refusals,
    unknown_settings,
)
from cli import serve_help

# The project's code: app/ and tests/ beside this package, or app/ where it is installed.
PROJECT_ROOT = Path(framework.__file__).resolve().parents[2]

cli = typer.Typer(
    name=PROJECT_SLUG,
    help=f"{PROJECT_SLUG}: serve the app on the engine and loop of your choice.",
    no_args_is_help=True,
    add_completion=False,
    # Click's plain help, not rich's table: rich gives `serve`'s options (and their
    # --no- forms) fixed columns and cuts what does not fit with an ellipsis, leaving
    # the help a column 20 wide at 80 columns; click's list keeps every name whole and
    # wraps the help beside it (tests/test_cli_help.py checks at 80 columns).
    rich_markup_mode=None,
)


def serve(**flags: object) -> None:
    """Start the web server. Flags override the environment and .env for this run."""
    from app.core import database
    from serving import launcher, metrics_listener

    try:
        settings = load_settings(**flags)
    except SettingsError as error:
        refuse(str(error))
    for note in [*unknown_settings(env_file())[1], *overridden_refusals(**flags)]:
        typer.echo(f"Note: {note}.", err=True)
    if reason := tracing.refusal():  # the OTEL_* variables (docs/observability.md)
        refuse(reason)
    if mixed := framework.foreign_imports(PROJECT_ROOT):  # two Starlettes break silently
        refuse(f"{mixed[0]}.")
    try:
        address = launcher.listen_address(settings.host, settings.port)
        if settings.metrics == "port":
            launcher.listen_address(settings.host, settings.metrics_port,
                                  where=launcher.METRICS_PORT_FROM)
    except launcher.ListenError as error:
        refuse(str(error))
    if problem := database.startup_problem(settings):  # waits for it, a bounded time
        refuse(problem)
    try:
        launcher.serve(settings.model_copy(update={"host": address}))
    except (launcher.ListenError, metrics_listener.RunDirectoryError) as error:
        refuse(str(error))


def _serve_option(spec: SettingSpec) -> inspect.Parameter:
    declarations = [f"{spec.option}/--no-{spec.option[2:]}"] if spec.kind is bool else []
    # None, not the default: a flag not given leaves the environment, .env or default.
    option = typer.Option(None, *declarations, help=serve_help.flag_help(spec),
                          metavar=serve_help.metavar(spec), show_default=False)
    return inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY,
                             annotation=spec.kind | None, default=option)


# One option per declared setting, built from the declaration (app/core/setting_specs.py).
SERVE_OPTIONS = [_serve_option(spec) for spec in SETTINGS]
serve.__signature__ = inspect.Signature(SERVE_OPTIONS)  # type: ignore[attr-defined]
serve.__annotations__ = {spec.name: spec.kind | None for spec in SETTINGS}
cli.command(cls=serve_help.ServeCommand)(serve)


def refuse(sentence: str) -> NoReturn:
    typer.echo(f"Cannot start: {sentence}", err=True)
    raise typer.Exit(2)


class BenchCommands(TyperGroup):
    """`bench`: the measuring tool beside the service, in its own package (`bench/`),
    imported only when a bench command runs or its help is shown."""

    def _loaded(self) -> TyperGroup:
        from bench.command import bench

        return typer.main.get_command(bench)  # type: ignore[return-value]

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return self._loaded().list_commands(ctx)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        return self._loaded().get_command(ctx, cmd_name)


cli.add_typer(typer.Typer(), name="bench", cls=BenchCommands, no_args_is_help=True,
              help="Measure the engines, or this app's layers, on a route of this app.",
              short_help="Measure the engines or this app's layers.")


@cli.command(short_help="Replace a running server's workers with the code on disk.")
def reload(
    port: int = typer.Option(None, "--port", help="The running server's port "
                             "(default: WEBSERVER_PORT, as `serve` reads it)."),
) -> None:
    """Send SIGHUP to the server on this machine listening on PORT: it checks that the
    code on disk loads, then replaces its workers one by one, losing no request (a
    version that fails to load is refused in its log, and the old workers go on)."""
    import os
    import signal

    from serving.reload import server_pid

    if port is None:
        try:
            port = load_settings().port
        except SettingsError as error:
            refuse(str(error))
    pid = server_pid(port)
    if pid is None:
        refuse(f"no server of this machine that this user can see listens on port {port} "
               "(--port, WEBSERVER_PORT).")
    try:
        os.kill(pid, signal.SIGHUP)
    except PermissionError:
        refuse(f"the server on port {port} (pid {pid}) belongs to another user: run this "
               "as that user, or `systemctl reload` it.")
    typer.echo(f"Sent SIGHUP to the server on port {port} (pid {pid}); its log says when "
               "the workers are replaced, or why the code on disk was refused.")


@cli.command(short_help="Which loops each engine runs here, and what `auto` picks.")
def engines(
    markdown: bool = typer.Option(
        False, "--markdown", help="Print the whole matrix, every Python, as Markdown."
    ),
) -> None:
    """Show which loops each engine runs on this Python, and what `auto` picks."""
    if markdown:
        typer.echo(matrix_markdown.tables(loops), nl=False)
        return
    python = loops.python_version()
    # Here, not at the top: `serve` needs neither (rich slows its start).
    from rich.console import Console
    from rich.table import Table

    from app.core.settings import served

    served_engines, served_loops = served()
    pairs = loops.served_pairs(served_engines, served_loops, python)
    table = Table(title=f"Engines and loops on Python {loops.version_text(python)}")
    for column in ("engine", "loop", "verdict", "installed", "served here"):
        table.add_column(column)
    for engine in loops.ENGINES:
        for name in loops.LOOPS:
            reason = loops.refusal(engine, name, python)
            # The reason in the user's terms; the measured one is in docs/engines.md.
            why = (loops.LOOPS[name].refused_briefly.get(engine) or reason or "").replace(
                f" ({loops.WHY_REFUSED})", "")
            verdict = "accepted" if reason is None else f"refused: {why}"
            installed = "yes" if loops.is_installed(name) else "no"
            table.add_row(engine, name, verdict, installed,
                          "yes" if (engine, name) in pairs else "")
        auto = loops.resolve(engine, loops.AUTO, python, served_loops)
        table.add_row(engine, loops.AUTO, f"resolves to {auto}", "", "")
    Console().print(table)
    typer.echo("Served here: WEBSERVER_SERVED_ENGINES and WEBSERVER_SERVED_LOOPS (the "
               "answers served_engines, served_loops); the measured reasons behind each "
               "refusal: docs/engines.md, \"Evidence\".")
    from app.core.settings import DATABASE

    for loop, why in loops.DATABASES[DATABASE].refused_loops.items():
        typer.echo(f"Not served with this project's database ({DATABASE}): {loop}, as "
                   f"{why} (docs/database.md).")

    parsers = Table(title="HTTP parsers (WEBSERVER_HTTP)")
    for column in ("engine", "parser", "HTTP/2", "verdict", "installed"):
        parsers.add_column(column)
    for engine, engine_spec in loops.ENGINE_SPECS.items():
        # Each engine's own parsers; `serve` refuses the others with a sentence.
        for name in engine_spec.parsers:
            spec = loops.HTTP_PARSERS[name]
            installed = "yes" if loops.importable(spec.module) else "no"
            http2 = "yes" if spec.http2 or engine_spec.http2_any_parser else "no"
            parsers.add_row(engine, name, http2, "accepted", installed)
        auto = loops.resolve_http(engine)
        http2 = "yes" if engine_spec.http2_any_parser else "no"
        parsers.add_row(engine, loops.AUTO, http2, f"resolves to {auto}", "")
    Console().print(parsers)
