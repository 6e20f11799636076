"""A setting that cannot work stops `serve` with one sentence and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.core import loops
from tests.server_process import PROJECT_DIR, free_port

NOT_INSTALLED = next(
    (name for name in loops.engine_loops("uvicorn", loops.python_version())[1:]
     if not loops.is_installed(name)),
    None,
)
BAD_SETTINGS = [
    ({"WEBSERVER_ENGINE": "nginx"}, "Unknown engine"),
    ({"WEBSERVER_LOOP": "trio"}, "Unknown loop"),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "rloop"}, "rloop needs the granian engine"),
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_LOOP": "zuvloop"}, "zuvloop needs the uvicorn"),
    ({"WEBSERVER_PORT": "http"}, "WEBSERVER_PORT='http' is refused"),
    ({"WEBSERVER_PORT": "70000"}, "WEBSERVER_PORT='70000' is refused"),
    ({"WEBSERVER_WORKERS": "0"}, "WEBSERVER_WORKERS='0' is refused"),
    ({"WEBSERVER_LOG_LEVEL": "loud"}, "WEBSERVER_LOG_LEVEL='loud' is refused"),
    ({"WEBSERVER_RELOAD": "true", "WEBSERVER_WORKERS": "2"}, "cannot be combined"),
]
if loops.python_version() < (3, 14):
    BAD_SETTINGS.append(
        ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "zuvloop"}, "needs Python 3.14")
    )
if NOT_INSTALLED:
    BAD_SETTINGS.append(
        ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": NOT_INSTALLED}, "is not installed")
    )


@pytest.mark.parametrize(("settings", "sentence"), BAD_SETTINGS, ids=str)
def test_bad_setting_is_one_sentence_and_exit_2(settings: dict[str, str], sentence: str) -> None:
    env = {**os.environ, "WEBSERVER_PORT": str(free_port()), **settings}
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve"],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "Starting" not in result.stderr  # nothing was started
    assert result.stderr.startswith("Cannot start: ")
    assert sentence in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
