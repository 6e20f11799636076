"""Which configurations `bench engines` measures, from the matrix (no servers booted)."""

from __future__ import annotations

import pytest

from app.core import loops
from bench.model import configs_for

PYTHON = loops.python_version()
EVERYTHING = (loops.ENGINES, tuple(loops.LOOPS))  # served, whatever the project's answers


def test_loop_all_sweeps_every_installed_loop_each_engine_accepts() -> None:
    labels = {(c.engine, c.loop) for c in configs_for(list(loops.ENGINES), ["all"], ["auto"],
                                                        serving=EVERYTHING)}
    # Written out, not derived from the matrix: what each engine runs (docs/engines.md).
    expected = {("uvicorn", "asyncio"), ("uvicorn", "uvloop"),
                ("granian", "asyncio"), ("granian", "uvloop"), ("granian", "rloop"),
                ("gunicorn", "asyncio"), ("gunicorn", "uvloop"),
                ("hypercorn", "asyncio"), ("hypercorn", "uvloop"), ("hypercorn", "trio")}
    if PYTHON >= (3, 14):  # zuvloop publishes wheels for 3.14+ only
        expected.add(("uvicorn", "zuvloop"))
    assert labels == expected


def test_a_loop_only_one_engine_runs_is_measured_on_that_engine() -> None:
    configs = configs_for(list(loops.ENGINES), ["rloop"], ["auto"], skip_refused=True,
                          serving=EVERYTHING)
    assert [(c.engine, c.loop) for c in configs] == [("granian", "rloop")]


def test_trio_is_measured_on_hypercorn_alone() -> None:
    configs = configs_for(list(loops.ENGINES), ["trio"], ["auto"], skip_refused=True,
                          serving=EVERYTHING)
    assert [(c.engine, c.loop) for c in configs] == [("hypercorn", "trio")]


def test_a_named_engine_with_a_refused_loop_is_a_sentence() -> None:
    with pytest.raises(ValueError, match="rloop needs the granian engine"):
        configs_for(["uvicorn"], ["rloop"], ["auto"])


def test_parsers_apply_to_the_engines_that_take_them() -> None:
    configs = configs_for(list(loops.ENGINES), ["auto"], ["auto", "h11", "python"],
                          serving=EVERYTHING)
    assert {(c.engine, c.http) for c in configs} == {
        ("uvicorn", "auto"), ("uvicorn", "h11"), ("granian", "auto"),
        ("gunicorn", "auto"), ("gunicorn", "python"), ("hypercorn", "auto")}


def test_only_the_engines_and_loops_served_are_measured() -> None:
    served = (("uvicorn", "hypercorn"), ("asyncio", "uvloop"))
    configs = configs_for(["uvicorn", "hypercorn"], ["all"], ["auto"], serving=served)
    assert {(c.engine, c.loop) for c in configs} == {
        ("uvicorn", "asyncio"), ("uvicorn", "uvloop"), ("hypercorn", "asyncio"),
        ("hypercorn", "uvloop")}
    with pytest.raises(ValueError, match="does not serve the engine granian"):
        configs_for(["granian"], ["auto"], ["auto"], serving=served)
