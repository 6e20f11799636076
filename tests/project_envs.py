"""One virtual environment per Python version, shared by every rendered project.

The answers change the defaults, never the dependencies, so all projects of one Python
install the same packages: build that environment once (keyed by the dependency
list) and run each rendered project's code and tests with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.interpreters import Interpreter

CACHE = Path(os.environ.get("TEMPLATE_ENV_CACHE", Path(__file__).parents[1] / ".cache" / "envs"))
UV = str(Path(sys.executable).with_name("uv"))
UV_ENV = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}


def environment_python(interpreter: Interpreter, pyproject: Path, pins: Sequence[str] = ()) -> Path:
    """The python of a ready environment holding pyproject's dependencies and dev group,
    with `pins` (requirements such as "fastapi==0.115.0") holding versions in place."""
    key = hashlib.sha256(pyproject.read_bytes() + " ".join(pins).encode()).hexdigest()[:12]
    env_dir = CACHE / f"py{interpreter.version}-{key}"
    python = env_dir / "bin" / "python"
    ready = env_dir / ".ready"
    if ready.exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers may ask for the same environment at once: one builds it.
    with open(CACHE / f"{env_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            _build(interpreter, pyproject, env_dir, pins)
            ready.touch()
    return python


def _build(interpreter: Interpreter, pyproject: Path, env_dir: Path,
           pins: Sequence[str]) -> None:
    python = env_dir / "bin" / "python"
    # uv is one static binary: the rooted interpreter runs the same one inside its root.
    for argv in (
        [UV, "venv", "--quiet", "--clear", "--python", interpreter.executable, str(env_dir)],
        # Not compiled here: the run's processes write the bytecode of what they import
        # (conftest.py lets them), far fewer than the environment holds (docs/suite.md).
        [UV, "pip", "install", "--quiet", "--python", str(python),
         "-r", str(pyproject), "--group", f"{pyproject}:dev", *pins],
    ):
        subprocess.run(interpreter.command(argv), check=True, env=UV_ENV)
