"""`serve --help`: its flags in the groups of app/core/setting_specs.py, each with its
default and, when the environment or `.env` sets another, the value in force."""

from __future__ import annotations

import os
from typing import Any

import typer
from dotenv import dotenv_values
from typer.core import TyperCommand

from app.core import loops
from app.core.answers import ANSWERS
from app.core.setting_specs import BY_NAME, SettingSpec
from app.core.settings import env_file, env_file_refusal

# The matrix's names (app/core/loops.py): the settings hold them as plain text, so that a
# wrong one gets the matrix's sentence, but the help lists them as choices.
MATRIX_CHOICES: dict[str, tuple[str, ...]] = {
    "engine": loops.ENGINES, "loop": loops.LOOP_POLICIES, "http": loops.HTTP_POLICIES,
}
OTHER_OPTIONS = "Options"  # --help, and a setting no group claims (a test refuses one)


def choices(spec: SettingSpec) -> tuple[str, ...]:
    return MATRIX_CHOICES.get(spec.name, spec.choices)


def metavar(spec: SettingSpec) -> str | None:
    """`[uvicorn|granian|...]` for a setting with choices; else typer's own."""
    return f"[{'|'.join(choices(spec))}]" if choices(spec) else None


def flag_help(spec: SettingSpec, in_force: tuple[str, str] | None = None) -> str:
    """What the flag sets, its bounds, its default and (given) the value in force."""
    # Choices are in the metavar, and a boolean's two flags say true or false.
    bounds = "" if choices(spec) or spec.kind is bool else spec.accepts()
    notes = [bounds, f"default: {shown(spec.text(spec.default_for(ANSWERS)))}"]
    if in_force is not None:
        value, source = in_force
        notes.append(f"now {shown(value)} from {source}")
    # Parentheses, not brackets: rich would take "[env ...]" for markup and drop it.
    return f"{spec.help} ({'; '.join(note for note in notes if note)}; env {spec.env})"


def shown(value: str) -> str:
    return value or '""'  # an empty value, seen


def values_in_force() -> dict[str, tuple[str, str]]:
    """{setting: (value, where it is set)} for each setting the environment or `.env` set
    to other than its default, as written there (a wrong one is refused at start)."""
    given: dict[str, tuple[str, str]] = {}
    local = env_file()
    if local and env_file_refusal(local) is None:  # none, or one that reads
        given |= {name.upper(): (value, local)
                  for name, value in dotenv_values(local).items() if value is not None}
    # The environment wins over the file, as pydantic-settings reads them (any case).
    given |= {name.upper(): (value, "the environment") for name, value in os.environ.items()}
    in_force = {}
    for spec in BY_NAME.values():
        if spec.env in given and not _same(spec, given[spec.env][0]):
            in_force[spec.name] = given[spec.env]
    return in_force


def _same(spec: SettingSpec, value: str) -> bool:
    """Whether a value as written is the default (1.0 is 1, TRUE is true)."""
    default = spec.default_for(ANSWERS)
    if spec.kind in (int, float):
        try:
            return float(value) == float(default)  # type: ignore[arg-type]
        except ValueError:
            return False
    if spec.kind is bool:
        return value.strip().lower() == spec.text(default)
    if spec.name in ("served_engines", "served_loops"):  # lists: the names, not the text
        return loops.names(value) == loops.names(str(default))
    return value == default


class ServeCommand(TyperCommand):
    """`serve`, its options listed one group of settings at a time, in declared order."""

    # The formatter is typer's own click's, which has no public name to annotate it with.
    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        in_force = values_in_force()
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            spec = BY_NAME.get(param.name or "")
            if spec is not None:
                record = (record[0], flag_help(spec, in_force.get(spec.name)))
            group = spec.group if spec is not None and spec.group else OTHER_OPTIONS
            sections.setdefault(group, []).append(record)
        # OTHER_OPTIONS last: a dict keeps the order of the first flag of each group.
        for group in sorted(sections, key=lambda title: title == OTHER_OPTIONS):
            with formatter.section(group):
                formatter.write_dl(sections[group])
