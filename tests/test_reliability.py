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
from tests.conftest import COPIER_DEFAULTS, environment_for


def run_marked(copie, python_version: str | None, marker: str) -> str:
    answers = {"python_version": python_version} if python_version else {}
    result = copie.copy(extra_answers=answers)
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    version = python_version or result.answers["python_version"]
    interpreter, python = environment_for(version, project / "pyproject.toml")
    run = subprocess.run(
        interpreter.command(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, "-rA"],
            project,
        ),
        cwd=project, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "deselected" in run.stdout
    return run.stdout


DEFAULT_PYTHON = COPIER_DEFAULTS["python_version"]
WORKER_START_PYTHONS = [DEFAULT_PYTHON, loops.PYTHON_VERSIONS[-1]]


@pytest.mark.parametrize("python_version", WORKER_START_PYTHONS)
def test_drain_and_dev_reload(copie, python_version: str) -> None:
    run_marked(copie, python_version, "slow and not long")


def test_worker_lifetime(copie) -> None:
    """A minute of waiting, mostly idle: its own test, so xdist overlaps it with others."""
    run_marked(copie, None, "long")


def test_bench_drivers(copie) -> None:
    output = run_marked(copie, None, "bench")
    # CI installs wrk, h2load and ab: there, no driver may be skipped.
    if os.environ.get("REQUIRED_PYTHONS"):
        assert "SKIPPED" not in output, output[-3000:]
