"""The generated Dockerfile lints clean and keeps the promises a deploy relies on.

No Docker engine runs here, so the image is not built: hadolint checks the file, and
the assertions below check what hadolint does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HADOLINT = str(Path(sys.executable).with_name("hadolint"))


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    joined = dockerfile.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines if line and not line.startswith("#")
    ]


@pytest.mark.parametrize(
    "answers",
    [{}, {"python_version": "3.14", "default_engine": "granian", "port": 9000}],
    ids=["defaults", "granian-3.14"],
)
def test_dockerfile(copie, answers: dict[str, object]) -> None:
    result = copie.copy(extra_answers=answers)
    assert result.exit_code == 0, result.exception
    dockerfile = result.project_dir / "Dockerfile"
    lint = subprocess.run([HADOLINT, "--no-color", str(dockerfile)],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr

    steps = instructions(dockerfile)
    kinds = [kind for kind, _ in steps]
    cmd = json.loads(dict(steps)["CMD"])  # exec form: a JSON array, no shell in between
    assert cmd == ["my-service", "serve"]  # the launcher, named after "My Service"
    user = [args for kind, args in steps if kind == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert kinds.index("USER") < kinds.index("CMD")
    healthcheck = dict(steps)["HEALTHCHECK"]
    assert "/health/" in healthcheck
    port = str(answers.get("port", 8000))
    assert any(f"WEBSERVER_PORT={port}" in args for kind, args in steps if kind == "ENV")
    ignored = (result.project_dir / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored
