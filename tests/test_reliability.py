"""The generated project's slow tests, once per Python, and its bench tests once.

Drain under load and dev reload do not depend on the answers, only on how the engines
start workers: forked on 3.11-3.13, spawned on 3.14 (granian). So they run on the
default Python and on 3.14; every combination runs the fast rest
(test_combinations.py). The bench tests exercise the load drivers, which do
not change with the Python: they run on the default answers.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from extensions.matrix import loops
from tests.conftest import (
    DEFAULT_PYTHON,
    TEMPLATE_ROOT,
    environment_for,
    full_only,
    only_in_full_matrix,
)


def run_marked(copie, python_version: str | None, marker: str, *paths: str) -> str:
    # Every loop served, trio included: the template's promises on each, on its own app.
    answers = {"served_loops": list(loops.LOOPS),
               **({"python_version": python_version} if python_version else {})}
    result = copie.copy(extra_answers=answers)
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    version = python_version or result.answers["python_version"]
    interpreter, python = environment_for(version, project / "pyproject.toml")
    run = subprocess.run(
        interpreter.command(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, "-rA",
             *paths],
            project,
        ),
        cwd=project, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    # A marker that matched nothing would pass too: it must have left tests out.
    assert paths or "deselected" in run.stdout
    return run.stdout


# Forked workers on the default Python; spawned ones (granian) on the newest.
WORKER_START_PYTHONS = [DEFAULT_PYTHON, loops.PYTHON_VERSIONS[-1]]
# The project's slow tests in two parts, so the two suite workers share them evenly.
SLOW_PARTS = {
    "settings": ["tests/test_tuning.py"],
    "drain-reload": ["tests/test_drain.py", "tests/test_dev_reload.py"],
    "limits": ["tests/test_limits.py"],
    "hostile": ["tests/test_hostile_clients.py"],
    "observability": ["tests/test_metrics.py", "tests/test_tracing.py"],
    "restarts": ["tests/test_restarts.py"],
}


@pytest.mark.parametrize(("python_version", "part"), [
    full_only(version, part, full=version != DEFAULT_PYTHON)
    for version in WORKER_START_PYTHONS for part in SLOW_PARTS])
def test_slow_tests(copie, python_version: str, part: str) -> None:
    run_marked(copie, python_version, "slow and not long", *SLOW_PARTS[part])


def test_slow_parts_cover_every_slow_module() -> None:
    template_tests = TEMPLATE_ROOT / "template" / "tests"
    slow = {f"tests/{path.name}" for path in template_tests.glob("test_*.py")
            if "pytest.mark.slow" in path.read_text()}
    assert slow == {path for paths in SLOW_PARTS.values() for path in paths}


@only_in_full_matrix
def test_worker_lifetime(copie) -> None:
    """A minute of waiting, mostly idle: its own test, so xdist overlaps it with others."""
    run_marked(copie, None, "long")


def test_bench_drivers(copie) -> None:
    output = run_marked(copie, None, "bench")
    # CI installs wrk, h2load and ab: there, no driver may be skipped.
    if os.environ.get("REQUIRED_PYTHONS"):
        assert "SKIPPED" not in output, output[-3000:]
