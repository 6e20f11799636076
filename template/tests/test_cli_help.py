"""`--help` read in a terminal of 80 columns: every name whole, nothing past the edge."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from typing import Any

import pytest
import typer

from app.cli import cli
from serving.setting_specs import SETTINGS
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


def help_at_80_columns(path: tuple[str, ...]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "app", *path, "--help"], cwd=PROJECT_DIR,
        env={**os.environ, "COLUMNS": str(COLUMNS), "TERMINAL_WIDTH": str(COLUMNS)},
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
