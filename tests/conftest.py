from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extensions.matrix import load_template_module, load_template_package, loops
from tests import interpreters, project_envs, releases

TEMPLATE_ROOT = Path(__file__).resolve().parents[1]
# Pythons that must be present: CI sets this so a missing one fails instead of skipping.
REQUIRED_PYTHONS = os.environ.get("REQUIRED_PYTHONS", "").split()
# The Pythons this run renders and boots (a CI job per Python sets one); default all.
TEMPLATE_PYTHONS = os.environ.get("TEMPLATE_PYTHONS", "").split()
# `make test` checks every capability once; `make test-all` (FULL_MATRIX=1, what CI
# runs) repeats what depends on the Python, the loop or the release for each of them.
# A suite started in the background (`make test &`, a CI runner) inherits SIGINT ignored,
# and so would every server it starts: a Ctrl-C test would then wait on a server that
# ignores it. The servers get SIGINT as a terminal gives it.
signal.signal(signal.SIGINT, signal.default_int_handler)
# A machine may forbid writing bytecode (PYTHONDONTWRITEBYTECODE): then each of the run's
# thousands of servers and nested pytest runs would compile (and assert-rewrite) the
# rendered project's modules anew. Its processes write it into the throwaway projects.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

FULL_MATRIX = os.environ.get("FULL_MATRIX") == "1"
FULL_ONLY = "full matrix only: make test-all (FULL_MATRIX=1) runs it"


server_process = load_template_module("tests/server_process.py")
load_template_package("bench")  # drain.py reads responses with bench.http1
drain = load_template_module("tests/drain.py")
# The answer sets a deployment is checked with: the defaults and one set per other engine.
DEPLOY_ANSWER_SETS: dict[str, dict[str, object]] = {
    "defaults": {},
    "granian-first": {"python_version": "3.14", "default_engine": "granian",
                      "loop_policy": "uvloop", "port": 9000, "workers": 2},
    "gunicorn-first": {"default_engine": "gunicorn", "loop_policy": "asyncio", "port": 9100,
                       "workers": 2},
    "hypercorn-first": {"default_engine": "hypercorn", "loop_policy": "uvloop", "port": 9200,
                        "workers": 2},
}
COPIER_YML = yaml.safe_load((TEMPLATE_ROOT / "copier.yml").read_text())
# The questions' defaults as copier.yml states them (what `--defaults` renders).
COPIER_DEFAULTS = {
    name: spec["default"] for name, spec in COPIER_YML.items()
    if isinstance(spec, dict) and "default" in spec and spec.get("when") is not False
    and "{{" not in str(spec["default"])
} | {"served_loops": ["asyncio", "uvloop", "rloop", "zuvloop"]}  # its default off trio
DEFAULT_PYTHON = COPIER_DEFAULTS["python_version"]
NEWEST_PYTHON = loops.PYTHON_VERSIONS[-1]


only_in_full_matrix = pytest.mark.skipif(not FULL_MATRIX, reason=FULL_ONLY)
# A user's app and tests, copied into rendered projects (test_user_app.py): not ours to run.
collect_ignore = ["user_app"]


def full_only(*values: object, full: bool = True) -> object:
    """A parameter set that only `make test-all` runs when `full`."""
    return pytest.param(*values, marks=[only_in_full_matrix] if full else [])


def pytest_configure(config: pytest.Config) -> None:
    # Once, in the controller, before xdist workers collect the update test's tags.
    if not hasattr(config, "workerinput"):
        releases.ensure_tags(TEMPLATE_ROOT)


# CPU_REPORT=FILE: each test's CPU seconds (its worker's, and the processes it started
# and waited for) appended to FILE; docs/suite.md sums them by capability. On two cores
# the run's length follows its CPU, not its tests' wall clocks.
CPU_REPORT = os.environ.get("CPU_REPORT")


def cpu_seconds() -> float:
    own, children = (resource.getrusage(who)
                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    if not CPU_REPORT:
        return (yield)
    before = cpu_seconds()
    try:
        return (yield)
    finally:
        with open(CPU_REPORT, "a") as report:
            report.write(f"{cpu_seconds() - before:.1f} {item.nodeid}\n")


# The tests that take minutes, longest first (docs/suite.md has their times): pyproject's
# `--dist load --maxschedchunk 1` hands them out in this order, one at a time, to
# whichever worker is free, so the workers end together instead of one waiting out a
# long test started last. Then the rest, module by module.
LONGEST_FIRST = ("test_a_notslowapi_project_passes_its_own_tests", "[restarts-sighup]",
                 "test_make_test_passes_with_the_users_app", "test_bench_drivers",
                 "test_an_update_adds_a_database_that_the_project_serves[postgresql]",
                 "[drain-reload]", "[restarts-rest]", "granian_on_the_newest_python",
                 "-uvicorn-auto]",
                 "test_a_project_serving_less", "[settings]", "[observability]",
                 "test_worker_lifetime", "test_the_readme_quick_start", "[limits]")
SLOWEST_MODULES = ["test_reliability.py", "test_user_app.py", "test_first_hour.py",
                   "test_container.py", "test_combinations.py", "test_update.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> tuple[int, int]:
        longest = next((index for index, part in enumerate(LONGEST_FIRST)
                        if part in item.nodeid), len(LONGEST_FIRST))
        name = item.path.name
        module = SLOWEST_MODULES.index(name) if name in SLOWEST_MODULES else len(SLOWEST_MODULES)
        return longest, module

    items.sort(key=rank)  # stable: each module keeps its own order


class Renders:
    """Projects rendered once per worker, by their answers, and shared by the tests that
    only read them or run their own tests (which edit copies, or put back what they
    add). A test that changes its project renders its own with `copie`."""

    def __init__(self, copie_session) -> None:
        self.copie = copie_session
        self.projects: dict[str, Path] = {}

    def __call__(self, given: dict[str, object]) -> Path:
        key = json.dumps(given, sort_keys=True)
        if key not in self.projects:
            result = self.copie.copy(extra_answers=given)
            assert result.exit_code == 0, result.exception
            self.projects[key] = result.project_dir
        return self.projects[key]

    def forget(self, given: dict[str, object]) -> None:
        """After a run killed or failed in the project: render it anew for the next."""
        self.projects.pop(json.dumps(given, sort_keys=True), None)


@pytest.fixture(scope="session")
def render_once(copie_session) -> Renders:
    return Renders(copie_session)


def rendered(copie, given: dict[str, object]) -> tuple[dict[str, object], Path]:
    """Render with these answers; (every answer, defaults included; the project)."""
    result = copie.copy(extra_answers=given)
    assert result.exit_code == 0, result.exception
    return {**COPIER_DEFAULTS, **given}, result.project_dir


def served_loop(loop_policy: str, engine: str, python: str) -> str:
    """The loop a project serves on. `auto` is the fastest loop the engine takes on that
    Python, as docs/engines.md measured it: zuvloop under uvicorn on 3.14 and newer, else
    uvloop (every environment installs both where they exist)."""
    if loop_policy != loops.AUTO:
        return loop_policy
    newer = loops.python_version(python) >= (3, 14)
    return "zuvloop" if engine == "uvicorn" and newer else "uvloop"


def require_interpreter(version: str) -> interpreters.Interpreter:
    if TEMPLATE_PYTHONS and version not in TEMPLATE_PYTHONS:
        pytest.skip(f"Python {version} is not in TEMPLATE_PYTHONS={' '.join(TEMPLATE_PYTHONS)}")
    found = interpreters.find(version)
    if found is None:
        tried = ", ".join(map(interpreters.describe, interpreters.candidates(version)))
        tried = tried or "nothing on PATH or in pyenv"
        message = f"no working Python {version} on this machine (tried: {tried})"
        if version in interpreters.ROOTED_BY:
            message += f"; run {interpreters.ROOTED_BY[version]} to add it"
        if version in REQUIRED_PYTHONS:
            pytest.fail(f"{message}; REQUIRED_PYTHONS lists it")
        pytest.skip(message)
    return found


def git(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "user.name=user", "-c", "user.email=user@example.com",
                           *args], cwd=project, check=True, capture_output=True, text=True)


def project_with_router(copie, router: str) -> Path:
    """A default render with `router` as app/routes/shop.py, committed as a user would."""
    result = copie.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    (project / "app/routes/shop.py").write_text(router)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "A project with a router of mine")
    return project


def update(project: Path, **answers: str) -> subprocess.CompletedProcess[str]:
    """`copier update` to the working tree with `--data` for each answer."""
    data = [part for name, value in answers.items() for part in ("--data", f"{name}={value}")]
    return subprocess.run([str(Path(sys.executable).with_name("copier")), "update", "--trust",
                           "--defaults", "--vcs-ref", "HEAD", *data],
                          cwd=project, capture_output=True, text=True, timeout=300)


def environment_for(version: str, pyproject: Path,
                    pins: tuple[str, ...] = ()) -> tuple[interpreters.Interpreter, Path]:
    interpreter = require_interpreter(version)
    return interpreter, project_envs.environment_python(interpreter, pyproject, pins)
