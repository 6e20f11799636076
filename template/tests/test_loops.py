"""The matrix agrees with what the engines themselves accept."""

from __future__ import annotations

import pytest
from granian.constants import Loops
from uvicorn.config import LOOP_FACTORIES

from app.core import loops

ENGINE_LOOP_CHOICES = {
    "uvicorn": set(LOOP_FACTORIES),
    "granian": {member.value for member in Loops},
}
CELLS = loops.matrix()


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_every_allowed_loop_is_a_value_the_engine_accepts(engine: str) -> None:
    for spec in loops.LOOPS.values():
        if engine in spec.engine_values:
            assert loops.engine_value(engine, spec.name) in ENGINE_LOOP_CHOICES[engine]


@pytest.mark.parametrize("engine", loops.ENGINES)
@pytest.mark.parametrize("python", loops.PYTHON_VERSIONS)
def test_auto_never_hands_the_engine_rloop_or_zuvloop(engine: str, python: str) -> None:
    resolved = loops.resolve(engine, loops.AUTO, loops.python_version(python))
    # Named here, not read from the matrix: the rule is that auto means uvloop where
    # installed, else asyncio, on both engines, whatever the matrix's tuple says.
    assert resolved == ("uvloop" if loops.importable("uvloop") else "asyncio")
    assert resolved not in ("rloop", "zuvloop")


@pytest.mark.parametrize("cell", [c for c in CELLS if not c.allowed], ids=str)
def test_each_refusal_names_what_the_engine_accepts(cell: loops.MatrixCell) -> None:
    accepted = loops.engine_loops(cell.engine, loops.python_version(cell.python))
    assert cell.refusal and f"{cell.engine} accepts" in cell.refusal
    assert all(name in cell.refusal for name in accepted)


def test_refused_cells_are_the_measured_ones() -> None:
    refused = {(c.engine, c.loop) for c in CELLS if not c.allowed}
    assert refused == {("uvicorn", "rloop"), ("uvicorn", "zuvloop"), ("granian", "zuvloop")}
    assert loops.refusal("uvicorn", "zuvloop", (3, 14)) is None


@pytest.mark.parametrize(("engine", "loop"), [("nginx", "auto"), ("uvicorn", "trio")])
def test_unknown_names_are_refused_with_the_choices(engine: str, loop: str) -> None:
    reason = loops.refusal(engine, loop, (3, 13))
    assert reason and reason.startswith("Unknown")
    assert "choose" in reason


def test_engines_markdown_covers_every_python_and_parser() -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    result = CliRunner().invoke(cli, ["engines", "--markdown"])
    assert result.exit_code == 0
    for python in loops.PYTHON_VERSIONS:
        for engine in loops.ENGINES:
            assert f"| {python} | {engine} |" in result.output
    assert all(f"`{name}`" in result.output for name in loops.HTTP_POLICIES)
