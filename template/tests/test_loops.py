"""The matrix agrees with what the engines themselves accept."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest
from granian.constants import Loops
from gunicorn.config import Config
from uvicorn.config import LOOP_FACTORIES

from app.core import loops
from app.core.settings import DATABASE


def gunicorn_accepts(setting: str, value: str) -> bool:
    """Whether gunicorn's own validator takes `value` for `setting`."""
    try:
        Config().set(setting, value)
    except ValueError:
        return False
    return True


ENGINE_LOOP_CHOICES = {
    "uvicorn": set(LOOP_FACTORIES),
    "granian": {member.value for member in Loops},
    # gunicorn lists its loops nowhere but in its validator: ask it about every name.
    "gunicorn": {name for name in (*loops.LOOP_POLICIES, "rloop:new_event_loop")
                 if gunicorn_accepts("asgi_loop", name)},
    # Hypercorn's worker classes, as its documentation lists them (--worker-class).
    "hypercorn": {"asyncio", "uvloop", "trio"},
}
class Cell(NamedTuple):
    """One Python x engine x loop policy, with the matrix's verdict."""

    python: str
    engine: str
    loop: str
    refusal: str | None


CELLS = [Cell(python, engine, loop, loops.refusal(engine, loop, loops.python_version(python)))
         for python in loops.PYTHON_VERSIONS for engine in loops.ENGINES
         for loop in loops.LOOP_POLICIES]


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_every_allowed_loop_is_a_value_the_engine_accepts(engine: str) -> None:
    for spec in loops.LOOPS.values():
        if engine in spec.engine_values:
            assert loops.engine_value(engine, spec.name) in ENGINE_LOOP_CHOICES[engine]


@pytest.mark.parametrize("engine", loops.ENGINES)
@pytest.mark.parametrize("python", loops.PYTHON_VERSIONS)
def test_auto_is_the_fastest_loop_measured(engine: str, python: str) -> None:
    resolved = loops.resolve(engine, loops.AUTO, loops.python_version(python))
    # Named here, not read from the matrix: measured with `bench engines --loop all`
    # (docs/engines.md), zuvloop under uvicorn on 3.14, else uvloop, else asyncio; rloop
    # was no faster than uvloop on granian, so auto never picks it.
    if engine == "uvicorn" and python >= "3.14" and loops.importable("zuvloop"):
        assert resolved == "zuvloop"
    else:
        assert resolved == ("uvloop" if loops.importable("uvloop") else "asyncio")


# What each engine accepts, written out (docs/engines.md): the refusals must list it.
ACCEPTED = {
    ("uvicorn", False): {"auto", "asyncio", "uvloop"},
    ("uvicorn", True): {"auto", "asyncio", "uvloop", "zuvloop"},  # zuvloop: Python 3.14+
    ("granian", False): {"auto", "asyncio", "uvloop", "rloop"},
    ("granian", True): {"auto", "asyncio", "uvloop", "rloop"},
    ("gunicorn", False): {"auto", "asyncio", "uvloop"},
    ("gunicorn", True): {"auto", "asyncio", "uvloop"},
    ("hypercorn", False): {"auto", "asyncio", "uvloop", "trio"},
    ("hypercorn", True): {"auto", "asyncio", "uvloop", "trio"},
}


def accepted_in(sentence: str, engine: str) -> set[str]:
    """The loop names listed after "<engine> accepts" in a refusal, as whole words."""
    listed = re.search(rf"\b{engine} accepts ([\w ,]+)", sentence)
    assert listed, sentence
    return set(re.split(r", | or ", listed.group(1).strip()))


@pytest.mark.parametrize("cell", [c for c in CELLS if c.refusal], ids=str)
def test_each_refusal_names_what_the_engine_accepts(cell: Cell) -> None:
    assert cell.refusal
    newer = loops.python_version(cell.python) >= (3, 14)
    assert accepted_in(cell.refusal, cell.engine) == ACCEPTED[cell.engine, newer]


def test_refused_cells_are_the_measured_ones() -> None:
    refused = {(c.engine, c.loop) for c in CELLS if c.refusal}
    assert refused == {("uvicorn", "rloop"), ("uvicorn", "zuvloop"), ("granian", "zuvloop"),
                       ("gunicorn", "rloop"), ("gunicorn", "zuvloop"),
                       ("hypercorn", "rloop"), ("hypercorn", "zuvloop"),
                       ("uvicorn", "trio"), ("granian", "trio"), ("gunicorn", "trio")}
    assert loops.refusal("uvicorn", "zuvloop", (3, 14)) is None


def test_gunicorn_refuses_the_loops_the_matrix_refuses_it() -> None:
    assert ENGINE_LOOP_CHOICES["gunicorn"] == {"auto", "asyncio", "uvloop"}


def test_every_parser_is_a_value_its_engines_accept() -> None:
    for spec in loops.HTTP_PARSERS.values():
        for engine, value in spec.engine_values.items():
            if engine == "gunicorn":
                assert gunicorn_accepts("http_parser", value), spec.name
    assert not gunicorn_accepts("http_parser", "httptools")


def test_every_engine_honours_each_setting_or_says_why_not() -> None:
    """A setting added to FEATURES must say what each engine does with it."""
    for feature in loops.FEATURES.values():
        for engine in loops.ENGINES:
            honoured = engine in feature.honoured_by
            assert honoured != (engine in feature.refused_because), (feature.setting, engine)
    for spec in loops.LOOPS.values():
        for engine in loops.ENGINES:
            accepted = engine in spec.engine_values
            assert accepted != (engine in spec.refused_because), (spec.name, engine)
            assert accepted == (engine in spec.verified), (spec.name, engine)


@pytest.mark.parametrize(("engine", "loop"), [("nginx", "auto"), ("hypercorn", "tokio")])
def test_unknown_names_are_refused_with_the_choices(engine: str, loop: str) -> None:
    reason = loops.refusal(engine, loop, (3, 13))
    assert reason and reason.startswith("Unknown")
    assert "choose" in reason


def test_engines_markdown_covers_every_python_and_parser() -> None:
    from typer.testing import CliRunner

    from cli.main import cli

    result = CliRunner().invoke(cli, ["engines", "--markdown"])
    assert result.exit_code == 0
    for python in loops.PYTHON_VERSIONS:
        for engine in loops.ENGINES:
            assert f"| {python} | {engine} |" in result.output
    assert all(f"`{name}`" in result.output for name in loops.HTTP_POLICIES)


def test_engines_marks_the_pairs_served_here(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cli.main import cli

    monkeypatch.setenv("WEBSERVER_SERVED_ENGINES", "uvicorn,granian")
    monkeypatch.setenv("WEBSERVER_SERVED_LOOPS", "asyncio,rloop")
    result = CliRunner().invoke(cli, ["engines"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    loop_table = result.output.split("Served here")[0]  # the parsers' table follows
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in loop_table.splitlines() if line.startswith("│")]
    served_here = {(row[0], row[1]) for row in rows if len(row) == 5 and row[4] == "yes"}
    # With PostgreSQL, asyncpg cannot run on rloop, so the project does not serve it.
    rloop = set() if DATABASE == "postgresql" else {("granian", "rloop")}
    assert served_here == {("uvicorn", "asyncio"), ("granian", "asyncio"), *rloop}
    if not rloop:
        assert "Not served with this project's database (postgresql): rloop, as asyncpg" in (
            result.output)
    assert ["uvicorn", "auto", "resolves to asyncio", "", ""] in rows  # among the served


def test_the_matrix_makes_the_claims_the_tuning_tests_hold_engines_to() -> None:
    """tests/test_tuning.py boots each engine listed there for its setting: each must
    still honour it in the matrix, or be refused with the matrix's sentence."""
    from tests.test_tuning import HONOURED_BY

    for setting, engines in HONOURED_BY.items():
        claimed = tuple(engine for engine in loops.ENGINES
                        if engine in loops.FEATURES[setting].honoured_by)
        assert claimed == engines, setting
