"""What a user's app starts while it is built can be stopped, on every engine.

A rendered project whose `customize` (app/custom.py) starts a helper process, and a
thread that starts another one a moment later, as a user's code may. Each engine's
workers build the app; SIGTERM must stop those processes as it stops any other. A
signal mask a worker held while the app was built would pass to them for good
(docs/engines.md).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from extensions.matrix import loops
from tests.conftest import DEFAULT_PYTHON, environment_for, server_process

running = server_process.running  # alive, and not a zombie: the project's own check

CUSTOMIZE = '''def customize(app: FastAPI) -> None:
    """Called last by `create_app`, with every route and middleware in place."""
    import os
    import subprocess
    import threading
    import time

    def start_helper() -> None:
        helper = subprocess.Popen(["sleep", "120"])
        with open(os.environ["HELPER_PIDS"], "a") as pids:
            pids.write(f"{helper.pid}\\n")

    start_helper()

    def later() -> None:
        time.sleep(0.5)
        start_helper()

    threading.Thread(target=later, daemon=True).start()
'''


@pytest.fixture(scope="module")
def project_starting_helpers(copie_session) -> Path:
    result = copie_session.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    custom = result.project_dir / "app/custom.py"
    text = custom.read_text()
    start = text.index("def customize(app: FastAPI) -> None:")
    custom.write_text(text[:start] + CUSTOMIZE)
    return result.project_dir


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_processes_the_app_starts_stop_on_sigterm(project_starting_helpers: Path,
                                                 engine: str, tmp_path: Path) -> None:
    project = project_starting_helpers
    pids_file = tmp_path / "helpers"
    env = {"HELPER_PIDS": str(pids_file)}
    interpreter, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml")
    runner = interpreter.command([str(python)], project, env=env)
    helpers: list[int] = []
    try:
        with server_process.running_server(["--engine", engine, "--workers", "2"],
                                           python=runner, cwd=project, env=env):
            deadline = time.monotonic() + 10
            while len(helpers) < 4 and time.monotonic() < deadline:  # 2 per worker
                time.sleep(0.1)
                helpers = [int(pid) for pid in pids_file.read_text().split()] \
                    if pids_file.exists() else []
            assert len(helpers) >= 4, helpers
            for pid in helpers:
                os.kill(pid, signal.SIGTERM)
            time.sleep(2)
            deaf = [pid for pid in helpers if running(pid)]
    finally:
        for pid in helpers:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    assert deaf == [], f"{engine}: helper processes ignored SIGTERM: {deaf} of {helpers}"
