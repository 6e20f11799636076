"""A new project's first hour, following its README as a user would.

Copier's own command line renders the template (the working tree, `--defaults`); then
the shell blocks under the rendered README's "Quick start" heading run in order, as
written, in the new project, on a PATH with the project's Python and no uv (so `make`
bootstraps its own, as on a fresh machine): `make install`, the first commit (Copier's
task made the project a git repository), `make test`, `make serve` (in the background,
as a second terminal would have it), each `curl` (its answer checked against the JSON in
the line's comment), `make add PKG=...` and its commit. Ctrl-C (SIGINT to the process
group) then stops the server. Nothing is hard-coded here but how to run a line: change
the README's Quick start and this test runs the new one.

`make test` runs with `PYTEST_ADDOPTS=--collect-only`: the command works and finds the
project's tests, which test_user_app.py runs whole, with `make test`, on the same
answers and a user's app (its slow, bench and long ones run through
test_reliability.py and test_combinations.py).

A second test renders a project for a Python this machine does not have and checks that
`make install` stops with the Makefile's one sentence and downloads nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import releases
from tests.conftest import (
    DEFAULT_PYTHON,
    TEMPLATE_ROOT,
    full_only,
    require_interpreter,
    server_process,
)
from tests.project_envs import UV

COPIER = str(Path(sys.executable).with_name("copier"))
# Seconds each kind of line may take; the whole test stays within their sum (~8 min),
# and takes about a minute here.
# Bounds for a hung step, not speed checks: beside another CPU-heavy job the project's
# `make test` took over 180 s (about 100 s on a quiet machine; README: about 2 minutes).
TIMEOUTS = {("make", "install"): 600, ("make", "test"): 900, ("make", "add"): 300}
DEFAULT_TIMEOUT = 60
SERVE_START = 90  # `make serve` until /livez answers
SERVE_STOP = 30  # Ctrl-C until the server and make have exited
PACKAGE = "tenacity"  # what the README's `make add PKG=...` line adds
GIT_USER = {"GIT_AUTHOR_NAME": "First Hour", "GIT_AUTHOR_EMAIL": "first.hour@example.com",
            "GIT_COMMITTER_NAME": "First Hour", "GIT_COMMITTER_EMAIL": "first.hour@example.com"}


def user_environment(python_dir: str | None) -> dict[str, str]:
    """The suite's environment as a user's shell would have it: the project's Python
    first on PATH, no uv on it, nothing of this pytest run, a git identity."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "uv").exists()]
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("PYTEST_")
           and name not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([*([python_dir] if python_dir else []), *path])
    return {**env, **GIT_USER}


def render(destination: Path, *data: str, ref: str | None = "HEAD"
           ) -> subprocess.CompletedProcess[str]:
    """`ref=None`: Copier's default copy, the newest release, as a user gets it."""
    flags = [arg for item in data for arg in ("--data", item)]
    refs = ["--vcs-ref", ref] if ref else []
    return subprocess.run(
        [COPIER, "copy", "--trust", "--defaults", *refs, *flags,
         str(TEMPLATE_ROOT), str(destination)],
        capture_output=True, text=True, timeout=120, env=user_environment(None),
    )


def quick_start(readme: str) -> list[str]:
    """The lines of the ```sh blocks under "## Quick start", in order."""
    match = re.search(r"^## Quick start\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, "the rendered README has no '## Quick start' section"
    blocks = re.findall(r"^```sh\n(.*?)^```", match[1], re.M | re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert lines, "the Quick start has no ```sh block"
    return lines


def expected_answer(line: str) -> object:
    """The JSON a `curl` line's comment says it prints."""
    comment = line.split("#", 1)[1].strip() if "#" in line else ""
    try:
        return json.loads(comment)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON answer in the comment of: {line}") from None


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def stop(server: subprocess.Popen[bytes]) -> int | None:
    """Ctrl-C in the server's terminal: SIGINT to its process group; the exit code."""
    if server.poll() is not None:
        return server.returncode
    os.killpg(server.pid, signal.SIGINT)
    try:
        return server.wait(timeout=SERVE_STOP)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        return None


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("ref", ["HEAD", full_only(None)], ids=["head", "newest-release"])
def test_the_readme_quick_start_works_as_written(tmp_path: Path, ref: str | None) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the Quick start's checks use it")
    interpreter = require_interpreter(DEFAULT_PYTHON)
    if interpreter.root_runner is not None:
        pytest.skip(f"Python {DEFAULT_PYTHON} is only inside {interpreter.root_runner}: "
                    "the project's Makefile needs it on this machine")
    started = time.monotonic()
    port = server_process.free_port()
    project = tmp_path / "my-service"
    copy = render(project, f"port={port}", ref=ref)
    assert copy.returncode == 0, copy.stdout + copy.stderr
    if ref is None:  # what users get: the newest release, named in the answers
        newest = releases.newest_release(TEMPLATE_ROOT)
        assert f"_commit: {newest}\n" in (project / ".copier-answers.yml").read_text()
    assert "Quick start" in copy.stdout + copy.stderr  # _message_after_copy points there
    # Copier's task: a new repository on main, nothing committed (the user's first step).
    assert (project / ".git").is_dir(), "the new project is not a git repository"
    assert git(project, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=project,
                          capture_output=True).returncode != 0, "something was committed"

    env = user_environment(str(Path(interpreter.executable).parent))
    lines = quick_start((project / "README.md").read_text())
    seen: list[str] = []
    server: subprocess.Popen[bytes] | None = None
    log = tmp_path / "serve.log"
    try:
        for line in lines:
            argv = shlex.split(line, comments=True)
            seen.append(" ".join(argv[:2]) if argv[0] in ("make", "git") else argv[0])
            if argv[:2] == ["make", "serve"]:
                assert server is None, "the Quick start serves twice"
                # The metrics listener's port, 9464 as a user's, would be the one port the
                # run's two quick starts (this release and the newest) share.
                metrics = {"WEBSERVER_METRICS_PORT": str(server_process.free_port(besides=port))}
                with log.open("wb") as out:
                    server = subprocess.Popen(["sh", "-c", line], cwd=project,
                                              env={**env, **metrics}, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True)
                deadline = time.monotonic() + SERVE_START
                while not answers(f"http://127.0.0.1:{port}/livez"):
                    assert server.poll() is None, f"{line}: exited\n{log.read_text()}"
                    assert time.monotonic() < deadline, f"{line}: not serving\n{log.read_text()}"
                    time.sleep(0.2)
                continue
            if argv[0] == "curl":
                assert server is not None and server.poll() is None, f"{line}: no server"
            collect_only = argv[:2] == ["make", "test"]  # the module's docstring says why
            result = subprocess.run(
                ["sh", "-c", line], cwd=project, capture_output=True, text=True,
                env={**env, "PYTEST_ADDOPTS": "--collect-only"} if collect_only else env,
                timeout=TIMEOUTS.get(tuple(argv[:2]), DEFAULT_TIMEOUT),
            )
            assert result.returncode == 0, f"{line}\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
            if argv[:2] == ["make", "test"]:
                assert re.search(r"\d+ (passed|tests collected)", result.stdout), \
                    result.stdout[-2000:]
            if argv[0] == "curl":
                assert json.loads(result.stdout) == expected_answer(line), line
        # Development serves FastAPI's docs (.env): a FastAPI user's first click.
        assert answers(f"http://127.0.0.1:{port}/docs"), log.read_text()[-2000:]
        # A second service beside the first needs only PORT: its metrics listener
        # follows (PORT + 1464) instead of clashing on the first one's (9464 for a user).
        second_port = server_process.free_port()
        with (tmp_path / "second.log").open("wb") as out:
            second = subprocess.Popen(["make", "serve", f"PORT={second_port}"], cwd=project,
                                      env=env, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        try:
            deadline = time.monotonic() + SERVE_START
            while not answers(f"http://127.0.0.1:{second_port}/livez"):
                assert second.poll() is None, (tmp_path / "second.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "second.log").read_text()
                time.sleep(0.2)
            # The listener is an interpreter of its own, started beside the engine: its
            # port accepts before the engine answers, its first answer may come after.
            while not answers(f"http://127.0.0.1:{second_port + 1464}/metrics"):
                assert time.monotonic() < deadline, (tmp_path / "second.log").read_text()
                time.sleep(0.2)
            assert answers(f"http://127.0.0.1:{port}/livez")  # the first one still serves
        finally:
            assert stop(second) is not None, (tmp_path / "second.log").read_text()
        # `make add` without a package: one sentence, nothing run.
        bare = subprocess.run(["make", "add"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=DEFAULT_TIMEOUT)
        assert bare.returncode != 0 and "Name the package: `make add PKG=NAME`" in bare.stderr
    finally:
        exit_code = stop(server) if server is not None else None
    assert server is not None and exit_code is not None, \
        f"the server did not stop within {SERVE_STOP} s of Ctrl-C\n{log.read_text()}"

    # The Quick start is the first hour: every step of it ran.
    for step in ["make install", "git add", "make test", "make serve", "curl", "make add"]:
        assert step in seen, f"the Quick start no longer has {step}"
    if shutil.which("uv", path=env["PATH"]) is None:
        assert (project / ".tools/bin/uv").exists(), "make did not bootstrap uv"
    # The dependency went after the template's last one (the merge anchor), is locked,
    # installed, and committed with everything else: the project is ready for
    # `copier update`.
    pyproject = (project / "pyproject.toml").read_text()
    assert re.search(rf'"pydantic-settings>=2\.6",\n    "{PACKAGE}[^"]*",\n', pyproject), pyproject
    assert f'name = "{PACKAGE}"' in (project / "uv.lock").read_text()
    subprocess.run([str(project / ".venv/bin/python"), "-c", f"import {PACKAGE}"], check=True)
    assert git(project, "status", "--porcelain") == ""
    assert len(git(project, "log", "--format=%H").split()) == sum(
        1 for line in lines if "git commit" in line)
    print(f"first hour: {len(lines)} lines in {time.monotonic() - started:.0f} s")


def test_a_missing_python_stops_make_with_one_sentence(tmp_path: Path) -> None:
    """A project for a Python this machine lacks: no download, one sentence saying how."""
    version = "3.14"
    path = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])
    if shutil.which(f"python{version}", path=path):
        pytest.skip(f"python{version} is on {path} here")
    project = tmp_path / "needs-314"
    copy = render(project, f"python_version={version}")
    assert copy.returncode == 0, copy.stdout + copy.stderr
    empty = tmp_path / "nothing"
    empty.mkdir()
    # A user's UV_PYTHON_DOWNLOADS=automatic included: the Makefile overrides it.
    env = {**user_environment(None), "PATH": path, "PYENV_ROOT": str(empty),
           "UV_PYTHON_INSTALL_DIR": str(empty), "UV_PYTHON_DOWNLOADS": "automatic"}
    for target in ("install", "serve"):
        result = subprocess.run(["make", target, f"UV={UV}"], cwd=project, env=env,
                                capture_output=True, text=True, timeout=60)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert (f"Python {version} (the project's, in .python-version) is not on this "
                f"machine and this Makefile never downloads one: install it with `pyenv "
                f"install {version}`, `uv python install {version}`") in output, output
        assert "download" not in output.replace("never downloads", ""), output
        assert not (project / ".venv").exists(), output
