"""Find a Python X.Y on this machine without downloading one.

PATH first (`python3.12`), then pyenv's installed versions (its shims answer only for
the global version, so `python3.12` on PATH may be a shim that fails).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Interpreter:
    version: str
    executable: str


def _reports_version(executable: str, version: str) -> bool:
    try:
        result = subprocess.run(
            [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == version


def _pyenv_root() -> Path:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        result = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        if result.returncode == 0:
            return Path(result.stdout.strip())
    return Path.home() / ".pyenv"


def candidates(version: str) -> list[str]:
    found = [path for path in [shutil.which(f"python{version}")] if path]
    versions = _pyenv_root() / "versions"
    found += [str(p) for p in sorted(versions.glob(f"{version}.*/bin/python{version}"))]
    return found


@functools.cache
def find(version: str) -> Interpreter | None:
    for executable in candidates(version):
        if _reports_version(executable, version):
            return Interpreter(version, executable)
    return None
