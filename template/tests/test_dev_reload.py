"""`make dev` survives a bad save: the error is reported, and the fix serves again."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from tests import served
from tests.request_set import loop_for
from tests.server_process import PROJECT_DIR, running_server, wait_until

pytestmark = pytest.mark.slow


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("engine", served.ENGINES)
def test_dev_server_recovers_after_a_bad_save(engine: str, tmp_path: Path) -> None:
    # Edit a copy, never the project itself: the app and the serving layer it runs on.
    for package in ("app", "serving", "cli"):
        shutil.copytree(PROJECT_DIR / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    edited = tmp_path / "app" / "api" / "health.py"
    good = edited.read_text()
    args = ["--engine", engine, "--loop", loop_for(engine), "--reload"]
    with running_server(args, cwd=tmp_path) as server:
        edited.write_text(good + "\ndef broken(:\n")
        # Wait for the reloader to report the error, so the fix is a second change.
        reported = wait_until(lambda: "SyntaxError:" in server.output(), timeout=15)
        down = not answers(server.url)
        edited.write_text(good)
        came_back = wait_until(lambda: answers(server.url), timeout=15)
        still_running = server.process.poll() is None
        output = server.output()
    assert reported, f"the bad save was not reported:\n{output[-3000:]}"
    assert down, "the server kept answering with a syntax error in the app"
    assert came_back, output[-3000:]
    assert still_running
    assert output.count("SyntaxError:") == 1, output[-3000:]
