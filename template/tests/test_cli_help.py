"""`--help` read in a terminal of 80 columns: every name whole, nothing past the edge;
`serve`'s flags in their groups, each with its default and the value in force."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer

from app.core import loops
from app.core.answers import ANSWERS
from app.core.setting_specs import BY_NAME
from app.core.settings import SETTINGS
from cli.main import cli
from tests.server_process import PROJECT_DIR

COLUMNS = 80
COMMAND = typer.main.get_command(cli)


# typer carries its own copy of click: commands and options are recognised by shape.
def subcommands(group: Any) -> list[str]:
    """A group's command names, as its help lists them (`bench` loads its own lazily)."""
    listed = getattr(group, "list_commands", None)
    return listed(typer.Context(group)) if listed else []


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the CLI, the top level first: (), ('serve',), ('bench', 'app')."""
    found = [path]
    for name in subcommands(group):
        found += commands(group.get_command(typer.Context(group), name), (*path, name))
    return found


def command_at(path: tuple[str, ...]) -> Any:
    command = COMMAND
    for name in path:
        command = command.get_command(typer.Context(command), name)
    return command


def help_at_80_columns(path: tuple[str, ...], **settings: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "cli", *path, "--help"], cwd=PROJECT_DIR,
        env={**os.environ, "COLUMNS": str(COLUMNS), "TERMINAL_WIDTH": str(COLUMNS),
             **settings},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def whole(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in line)


@pytest.mark.parametrize("path", commands(COMMAND), ids=lambda path: " ".join(path) or "top")
def test_help_is_whole_at_80_columns(path: tuple[str, ...]) -> None:
    text = help_at_80_columns(path)
    command = command_at(path)
    names = [opt for param in command.params if param.param_type_name == "option"
             for opt in (*param.opts, *param.secondary_opts)] + ["--help"]
    if path == ("serve",):
        names += [spec.env for spec in SETTINGS]
    names += subcommands(command)
    for name in names:
        assert whole(name, text), f"{name} is not shown whole:\n{text}"
    for line in text.splitlines():
        assert width(line) <= COLUMNS, f"{width(line)} columns: {line}"
        assert "…" not in line, line
        # Click shortens a command's summary with '...'; usage's '[ARGS]...' is no cut.
        assert "..." not in line.replace("[ARGS]...", ""), line


def test_serve_help_has_a_readable_description_column() -> None:
    """Each setting's help starts in a column at least 40 wide, and no value tags flags."""
    text = help_at_80_columns(("serve",))
    for spec in SETTINGS:
        start = " ".join(spec.help.split()[:3])
        line = next((line for line in text.splitlines() if start in line), None)
        assert line is not None, f"{start!r} not on one line:\n{text}"
        assert COLUMNS - line.index(start) >= 40, line
    assert "<bool>" not in text, text


@cache
def serve_help() -> str:
    return help_at_80_columns(("serve",))


def sections(text: str) -> dict[str, list[str]]:
    """A help's sections (a line `Title:` up to a blank line), by title, in their order."""
    found: dict[str, list[str]] = {}
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if re.fullmatch(r"\S.*:", line):
            body = itertools.takewhile(lambda line: line.strip(), lines[start + 1:])
            found[line.removesuffix(":")] = list(body)
    return found


def entries(text: str) -> dict[str, str]:
    """Each flag's entry in a help, by its first name, its lines joined by one space."""
    found: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("  --"):  # a flag's first line; its help continues indented
            name = line.split()[0]
        elif not line.startswith("   "):
            name = ""
        if name:
            found[name] = f"{found.get(name, '')} {line.strip()}".strip()
    return found


def declared_groups() -> list[str]:
    return list(dict.fromkeys(spec.group for spec in SETTINGS))


def test_every_setting_has_one_group() -> None:
    """A setting declared above the first heading has none; a heading repeated further
    down would split its group in two."""
    assert [spec.name for spec in SETTINGS if not spec.group] == []
    runs = [group for group, _ in itertools.groupby(spec.group for spec in SETTINGS)]
    assert runs == declared_groups(), runs


def test_serve_help_lists_the_groups_in_declared_order() -> None:
    assert list(sections(serve_help())) == [*declared_groups(), "Options"], serve_help()


def test_each_group_fits_a_screen() -> None:
    for title, lines in sections(serve_help()).items():
        assert len(lines) <= 25, f"{title}: {len(lines)} lines"


def test_every_serve_flag_shows_its_default() -> None:
    shown = entries(serve_help())
    for spec in SETTINGS:
        default = spec.text(spec.default_for(ANSWERS)) or '""'
        assert f"default: {default};" in shown[spec.option], shown[spec.option]


def test_a_value_set_in_the_environment_or_env_file_shows_as_in_force(tmp_path: Path) -> None:
    workers, port = BY_NAME["workers"], BY_NAME["port"]
    other_workers = int(workers.default_for(ANSWERS)) % 64 + 1  # type: ignore[call-overload]
    other_port = int(port.default_for(ANSWERS)) % 65535 + 1  # type: ignore[call-overload]
    local = tmp_path / "local.env"
    local.write_text(f"{port.env}={other_port}\n{workers.env}=64\n")
    shown = entries(help_at_80_columns(("serve",), **{
        "WEBSERVER_ENV_FILE": str(local), workers.env: str(other_workers)}))
    # The environment wins over the file, as when the server starts.
    assert f"now {other_workers} from the environment;" in shown["--workers"]
    # A long name may be cut anywhere: compared without the spaces wrapping adds.
    assert f"now{other_port}from{local};" in "".join(shown["--port"].split())
    assert "now " not in shown["--backlog"]


def test_choices_are_listed_as_choices() -> None:
    shown = entries(serve_help())
    matrix = {"engine": loops.ENGINES, "loop": loops.LOOP_POLICIES, "http": loops.HTTP_POLICIES}
    for spec in SETTINGS:
        listed = matrix.get(spec.name, spec.choices)
        if listed:
            assert shown[spec.option].startswith(f"{spec.option} [{'|'.join(listed)}]"), (
                shown[spec.option])
