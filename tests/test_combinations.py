"""Every allowed answer combination renders, lints clean, passes its own tests, and boots.

The project's own tests boot every engine on the combination's loop (OWN_TESTS says
which, where); the boot here checks what they do not: with no flags, the answers
(app/core/answers.py) are served.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from extensions.matrix import MatrixCell, loops, matrix
from tests.conftest import (
    DEFAULT_PYTHON,
    FULL_MATRIX,
    NEWEST_PYTHON,
    environment_for,
    full_only,
    only_in_full_matrix,
    served_loop,
    server_process,
)

RUFF = str(Path(sys.executable).with_name("ruff"))
ALLOWED = [cell for cell in matrix() if cell.allowed]
# Every cell renders, lints and boots its answers (no flags: the engine and loop are the
# answers). `make test`, the default Python's tier, boots every engine x loop pair on
# it (and the pairs only another Python has); `make test-all`, every cell.
BOOTED = [cell for cell in ALLOWED
          if FULL_MATRIX or cell.python == DEFAULT_PYTHON
          or not any(other.loop == cell.loop and other.python == DEFAULT_PYTHON
                     for other in ALLOWED)]
# The cells on asyncio, which every engine takes on every Python, are notslowapi
# projects: each engine serves the other framework on each Python at no extra render.
NOTSLOWAPI_LOOP = "asyncio"
# The project's own tests boot every engine on the project's loop policy, so they run
# once per Python and loop policy, on its first cell: `make test-all` only (`make test`
# runs them once, with a user's app: test_user_app.py). What changes between Pythons
# shows at either end, and how workers start changes only on the newest (granian); the
# Pythons between boot every cell.
# - With the policy `auto`: the quick tests whole on the newest Python in a notslowapi
#   project (test_framework.py), which the framework's upstream does not test; on the oldest,
#   the loop's boot tests here, and the quick tests whole in a project serving two
#   engines (test_a_project_serving_less_passes_its_own_tests); on the default Python,
#   the trio rows (the rest run there with a user's app, whose project serves every
#   loop but trio).
# - For every other policy, on the default and the newest Python, the boot tests that
#   depend on the loop: served on it by each engine, by two workers, and, on zuvloop
#   (the Zig loop with the Zig parser), with every parser. Not where `auto` is that
#   loop for every engine that takes it: the quick tests whole run them there already.
OWN_TESTS = {(cell.python, cell.loop): cell for cell in reversed(ALLOWED)}
OLDEST_PYTHON = loops.PYTHON_VERSIONS[0]
LOOP_TESTS = (DEFAULT_PYTHON, NEWEST_PYTHON)


def auto_is(loop: str, python: str) -> bool:
    """Whether `auto` serves `loop` under every engine that takes it on `python`."""
    takers = [engine for engine in loops.ENGINES
              if loop in loops.engine_loops(engine, loops.python_version(python))]
    return all(served_loop(loops.AUTO, engine, python) == loop for engine in takers)


def own_tests(cell: MatrixCell) -> list[str] | None:
    """The arguments of the project's pytest run for this cell ([]: the quick tests
    whole; None: no run)."""
    loop_tests = ["configured_loop", "two_workers", *(["parser"] if cell.loop == "zuvloop"
                                                      else [])]
    if cell.loop == loops.AUTO and cell.python == DEFAULT_PYTHON:
        return ["-k", "trio"]
    if (cell.python in LOOP_TESTS and not auto_is(cell.loop, cell.python)) or (
            cell.loop == loops.AUTO and cell.python == OLDEST_PYTHON):
        return ["tests/test_boot.py", "-k", " or ".join(loop_tests)]
    return None


@pytest.mark.parametrize("cell", [full_only(cell, full=cell not in BOOTED) for cell in ALLOWED],
                         ids=lambda c: f"{c.python}-{c.engine}-{c.loop}")
def test_combination(copie, cell: MatrixCell) -> None:
    framework = "notslowapi" if cell.loop == NOTSLOWAPI_LOOP else "fastapi"
    result = copie.copy(
        extra_answers={
            "python_version": cell.python,
            "default_engine": cell.engine,
            "loop_policy": cell.loop,
            "served_loops": list(loops.LOOPS),  # trio's branch tested in every project
            "framework": framework,
        }
    )
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    interpreter, python = environment_for(cell.python, project / "pyproject.toml")

    lint = subprocess.run([RUFF, "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout

    selection = own_tests(cell) if OWN_TESTS[(cell.python, cell.loop)] == cell else None
    if FULL_MATRIX and selection is not None:
        tests = subprocess.run(
            interpreter.command(
                [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "-m", "not slow and not bench", *selection],
                project,
            ),
            cwd=project, capture_output=True, text=True, timeout=400,
        )
        assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
        assert " passed" in tests.stdout, tests.stdout[-2000:]

    # No flags: the engine and loop are the answers (app/core/answers.py).
    full = {"WEBSERVER_HEALTH_DETAIL": "full"}
    runner = interpreter.command([str(python)], project, env=full)
    with server_process.running_server(python=runner, cwd=project, env=full) as server:
        detail = httpx.get(f"{server.url}/health/detailed").json()
    assert detail["engine"] == cell.engine
    loop = served_loop(cell.loop, cell.engine, cell.python)
    assert detail["loop"] == loop
    assert detail["loop_class"].startswith(loops.LOOPS[loop].module + ".")
    assert detail["python"].startswith(cell.python + ".")
    assert detail["framework"] == framework
    assert server.process.returncode in (0, -15)


# The quick tests on the oldest Python (their whole run there); Hypercorn's drain on the
# standard library's asyncio loop, whose server waits for open connections before the
# grace period starts from Python 3.12 on (serving/engines/hypercorn/worker.py), on
# the default Python.
SERVING_LESS = {"quick": (OLDEST_PYTHON, []),
                "hypercorn-drain": (DEFAULT_PYTHON,
                                    ["-m", "slow", "tests/test_drain.py", "-k", "hypercorn"])}


@only_in_full_matrix
@pytest.mark.parametrize("part", SERVING_LESS)
def test_a_project_serving_less_passes_its_own_tests(copie, part: str) -> None:
    """Two engines and two loops, neither uvloop: the project's quick tests skip what it
    does not serve and pass on the rest, and Hypercorn on asyncio stops within its
    graceful timeout."""
    python_version, selection = SERVING_LESS[part]
    result = copie.copy(extra_answers={
        "python_version": python_version, "default_engine": "granian",
        "served_engines": ["granian", "hypercorn"], "served_loops": ["asyncio", "rloop"]})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    interpreter, python = environment_for(python_version, project / "pyproject.toml")
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *selection], project),
        cwd=project, capture_output=True, text=True, timeout=400)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout
