"""Every allowed answer combination renders, lints clean, passes its own tests, and boots.

The project's own tests boot both engines on the combination's loop and run the same
request set (static file, WebSocket echo, forwarded headers) on each, once per Python
and loop policy; the boot here checks what they do not: with no flags, the answers
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
    environment_for,
    full_only,
    only_in_full_matrix,
    served_loop,
    server_process,
)

RUFF = str(Path(sys.executable).with_name("ruff"))
ALLOWED = [cell for cell in matrix() if cell.allowed]
# The project's own tests boot both engines on the project's loop policy, so two
# combinations that differ only in the default engine run the same tests: run them for
# the first combination of each Python and loop policy. The rest run once per Python,
# with the policy `auto`; for each other policy, the boot tests that depend on the loop:
# served on it, by each of two workers, and, on zuvloop (the Zig loop with the Zig
# parser), with every parser.
# `make test` runs them on the default Python with `auto`, and for the loops only a
# newer Python has (zuvloop); every engine x loop pair is booted below, on its loop. The
# loop-dependent tests of the other policies on the default Python repeat that with two
# workers: `make test-all` runs them, on every Python.
OWN_TESTS = {(cell.python, cell.loop): cell for cell in reversed(ALLOWED)
             if FULL_MATRIX or (cell.python == DEFAULT_PYTHON and cell.loop == loops.AUTO)
             or not any(other.loop == cell.loop and other.python == DEFAULT_PYTHON
                        for other in ALLOWED)}


# Each cell renders, lints and boots its answers. `make test` boots every engine x loop
# pair on the default Python (and the pairs only a newer Python has), and every engine
# with the policy `auto` on every Python; `make test-all`, every cell.
BOOTED = [cell for cell in ALLOWED
          if FULL_MATRIX or cell.python == DEFAULT_PYTHON or cell.loop == loops.AUTO
          or OWN_TESTS.get((cell.python, cell.loop)) == cell]


def loop_dependent_tests(loop: str) -> list[str]:
    selected = ["configured_loop", "two_workers", *(["parser"] if loop == "zuvloop" else [])]
    return ["tests/test_boot.py", "-k", " or ".join(selected)]


@pytest.mark.parametrize("cell", [full_only(cell, full=cell not in BOOTED) for cell in ALLOWED],
                         ids=lambda c: f"{c.python}-{c.engine}-{c.loop}")
def test_combination(copie, cell: MatrixCell) -> None:
    result = copie.copy(
        extra_answers={
            "python_version": cell.python,
            "default_engine": cell.engine,
            "loop_policy": cell.loop,
            "served_loops": list(loops.LOOPS),  # trio's branch tested in every project
        }
    )
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    interpreter, python = environment_for(cell.python, project / "pyproject.toml")

    lint = subprocess.run([RUFF, "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout

    if OWN_TESTS.get((cell.python, cell.loop)) == cell:
        own_tests = subprocess.run(
            interpreter.command(
                [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "-m", "not slow and not bench",
                 *(loop_dependent_tests(cell.loop) if cell.loop != loops.AUTO else [])],
                project,
            ),
            cwd=project, capture_output=True, text=True, timeout=400,
        )
        assert own_tests.returncode == 0, own_tests.stdout[-4000:] + own_tests.stderr[-2000:]

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
    assert server.process.returncode in (0, -15)


@only_in_full_matrix
def test_a_project_serving_less_passes_its_own_tests(copie) -> None:
    """Two engines and two loops, neither uvloop: the project's quick tests skip what it
    does not serve and pass on the rest, and Hypercorn on the standard library's asyncio
    loop (whose server waits for open connections before the grace period starts) stops
    within its graceful timeout."""
    result = copie.copy(extra_answers={
        "default_engine": "granian", "served_engines": ["granian", "hypercorn"],
        "served_loops": ["asyncio", "rloop"]})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    interpreter, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml")
    for selection in ([], ["-m", "slow", "tests/test_drain.py", "-k", "hypercorn"]):
        tests = subprocess.run(
            interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 *selection], project),
            cwd=project, capture_output=True, text=True, timeout=400)
        assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
        assert " passed" in tests.stdout
