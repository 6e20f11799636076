"""The generated project's slow tests (drain under load, dev reload), once per Python.

They do not depend on the answers beyond the Python version, so one rendered project
per Python runs them; every combination runs the fast rest (test_combinations.py).
"""

from __future__ import annotations

import subprocess

import pytest

from extensions.matrix import loops
from tests.conftest import environment_for


@pytest.mark.parametrize("python_version", loops.PYTHON_VERSIONS)
def test_drain_and_dev_reload(copie, python_version: str) -> None:
    result = copie.copy(extra_answers={"python_version": python_version})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    interpreter, python = environment_for(python_version, project / "pyproject.toml")
    slow = subprocess.run(
        interpreter.command(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow", "-rA"],
            project,
        ),
        cwd=project, capture_output=True, text=True, timeout=600,
    )
    assert slow.returncode == 0, slow.stdout[-6000:] + slow.stderr[-2000:]
    assert " passed" in slow.stdout and "deselected" in slow.stdout
