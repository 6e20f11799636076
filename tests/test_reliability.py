"""The generated project's slow tests, and its bench tests once: `make test-all` only.

They do not depend on the answers, only on how the engines start workers: forked on
every Python, except granian's, spawned on 3.14 and newer (uvicorn's and Hypercorn's
worker managers fork explicitly; gunicorn always forks). So every engine's rows run on
the default Python, and granian's again on the newest; every combination runs the quick
rest (test_combinations.py). The bench tests exercise the load drivers, which do not
change with the Python: they run on the default answers.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from extensions.matrix import loops
from tests.conftest import (
    DEFAULT_PYTHON,
    NEWEST_PYTHON,
    TEMPLATE_ROOT,
    Renders,
    environment_for,
    only_in_full_matrix,
)


def failures(output: str) -> str:
    """A nested run's failures from their start (its passes' output, printed after
    them by -rA, would push the top of a traceback out of a tail), and its summary."""
    start = output.find("= FAILURES =")
    head = output[max(start, 0):][:12000] if start >= 0 else ""
    return head + "\n...\n" + output[-2000:]


def run_marked(render_once: Renders, python_version: str, marker: str, *paths: str) -> str:
    # Every loop served, trio included: the template's promises on each, on its own app.
    answers = {"served_loops": list(loops.LOOPS),
               **({"python_version": python_version} if python_version != DEFAULT_PYTHON
                  else {})}
    project = render_once(answers)
    interpreter, python = environment_for(python_version, project / "pyproject.toml")
    run = None
    try:
        run = subprocess.run(
            interpreter.command(
                [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker,
                 "-rA", *paths],
                project,
            ),
            cwd=project, capture_output=True, text=True, timeout=600,
        )
    finally:
        if run is None or run.returncode != 0:
            render_once.forget(answers)  # a killed test may have left what it added
    assert run.returncode == 0, failures(run.stdout) + run.stderr[-2000:]
    assert " passed" in run.stdout
    # A marker that matched nothing would pass too: it must have left tests out.
    assert paths or "deselected" in run.stdout
    return run.stdout


# The project's slow tests in parts, so the suite's workers share them evenly.
SIGHUP = "sighup or reload_command"
SLOW_PARTS = {  # longest first (conftest.py)
    "restarts-sighup": ["tests/test_restarts.py", "-k", SIGHUP],
    "restarts-rest": ["tests/test_restarts.py", "-k", f"not ({SIGHUP})"],
    "drain-reload": ["tests/test_drain.py", "tests/test_dev_reload.py"],
    "settings": ["tests/test_tuning.py"],
    "observability": ["tests/test_metrics.py", "tests/test_tracing.py"],
    "limits": ["tests/test_limits.py"],
    "hostile": ["tests/test_hostile_clients.py"],
}


@only_in_full_matrix
@pytest.mark.parametrize("part", SLOW_PARTS)
def test_slow_tests(render_once, part: str) -> None:
    run_marked(render_once, DEFAULT_PYTHON, "slow and not long", *SLOW_PARTS[part])


# granian's rows on the newest Python, where its workers are spawned: every part where
# how a worker starts can show (a request's limits cannot; a spawned worker's memory
# can), the restarts (most of the time) apart from the rest.
PER_REQUEST = ("limits",)
NEWEST_PARTS = {"restarts": ["tests/test_restarts.py"],
                "the-rest": [path for part, paths in SLOW_PARTS.items()
                             if not part.startswith("restarts") and part not in PER_REQUEST
                             for path in paths]}


@only_in_full_matrix
@pytest.mark.parametrize("part", NEWEST_PARTS)
def test_slow_tests_of_granian_on_the_newest_python(render_once, part: str) -> None:
    output = run_marked(render_once, NEWEST_PYTHON, "slow and not long", "-k", "granian",
                        *NEWEST_PARTS[part])
    assert "granian" in output  # -rA names each test that ran


def test_slow_parts_cover_every_slow_module() -> None:
    template_tests = TEMPLATE_ROOT / "template" / "tests"
    slow = {f"tests/{path.name}" for path in template_tests.glob("test_*.py")
            if "pytest.mark.slow" in path.read_text()}
    assert slow == {path for paths in SLOW_PARTS.values() for path in paths
                    if path.endswith(".py")}


@only_in_full_matrix
def test_worker_lifetime(render_once) -> None:
    """A minute of waiting, mostly idle: its own test, so xdist overlaps it with others."""
    run_marked(render_once, DEFAULT_PYTHON, "long")


@only_in_full_matrix
def test_bench_drivers(render_once) -> None:
    output = run_marked(render_once, DEFAULT_PYTHON, "bench")
    # CI installs wrk, h2load and ab: there, no driver may be skipped.
    if os.environ.get("REQUIRED_PYTHONS"):
        assert "SKIPPED" not in output, output[-3000:]
