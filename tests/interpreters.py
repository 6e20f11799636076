"""Find a Python X.Y on this machine without downloading one.

PATH first (`python3.12`), then pyenv's installed versions (its shims answer only for
the global version, so `python3.12` on PATH may be a shim that fails), then a Debian
root built by `get-python314.sh` (and given 3.15 by `get-python315.sh`), whose
`py314-run` wrapper runs commands inside it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Host directories the rooted interpreter must see at the same paths: pytest's
# temporary projects and this repository (the environment cache and uv live here).
ROOT_BINDS = ("/tmp", str(Path(__file__).resolve().parents[1]))
PY314_RUN = os.environ.get("PY314_RUN", "/var/tmp/python314/bin/py314-run")
ROOTED_PYTHON = "/usr/bin/python{version}"
# The scripts that put a Python into that root (3.15: Debian experimental, same root).
ROOTED_BY = {"3.14": "shared/python314/get-python314.sh",
             "3.15": "shared/python315/get-python315.sh"}
ROOT_PASSED_ENV = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "UV_INDEX_URL", "UV_DEFAULT_INDEX",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "REQUIRE_PROMETHEUS",
)
# Host programs the project's tests run, which the root's own /usr lacks: each one's
# directory is bound under HOST_TOOLS and its path handed over in the variable the
# project's tests read (PROMETHEUS: tests/test_metrics.py).
HOST_TOOLS = "/opt/host-tools"
ROOTED_TOOLS = {"PROMETHEUS": "prometheus"}


def _host_tools() -> tuple[list[str], dict[str, str]]:
    """py314-run binds and the variables naming each host tool inside the root."""
    binds, env = [], {}
    for variable, name in ROOTED_TOOLS.items():
        found = shutil.which(name)
        if found:
            directory = f"{HOST_TOOLS}/{name}"
            binds += ["-b", f"{Path(found).parent}:{directory}"]
            env[variable] = f"{directory}/{Path(found).name}"
    return binds, env


@dataclass(frozen=True)
class Interpreter:
    version: str
    executable: str
    root_runner: str | None = None  # runs commands inside a root (py314-run)

    def command(self, argv: Sequence[str], cwd: Path | str = "/",
                env: dict[str, str] | None = None) -> list[str]:
        """argv as run by this interpreter's host: as is, or inside its root at `cwd`.
        `env` reaches the command inside the root too (give it to the process as well:
        a command run as is takes its environment from the process)."""
        if self.root_runner is None:
            return list(argv)
        tool_binds, tool_env = _host_tools()
        binds = [arg for path in ROOT_BINDS for arg in ("-b", path)] + tool_binds
        # The root starts with an empty environment: hand it the host's trust and index
        # settings (the root's CA store holds the same certificates), and keep uv from
        # fetching interpreters.
        passed = {name: os.environ[name] for name in ROOT_PASSED_ENV if name in os.environ}
        passed["UV_PYTHON_DOWNLOADS"] = "never"
        passed.update(tool_env)
        passed.update(env or {})
        env = [arg for name, value in passed.items() for arg in ("-e", f"{name}={value}")]
        return [self.root_runner, *binds, "-C", str(cwd), *env, "--", *argv]


def _reports_version(interpreter: Interpreter) -> bool:
    probe = [interpreter.executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    try:
        result = subprocess.run(
            interpreter.command(probe),
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == interpreter.version


def _pyenv_root() -> Path:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        result = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        if result.returncode == 0:
            return Path(result.stdout.strip())
    return Path.home() / ".pyenv"


def candidates(version: str) -> list[Interpreter]:
    found = [path for path in [shutil.which(f"python{version}")] if path]
    versions = _pyenv_root() / "versions"
    found += [str(p) for p in sorted(versions.glob(f"{version}.*/bin/python{version}"))]
    interpreters = [Interpreter(version, path) for path in found]
    if Path(PY314_RUN).exists():
        interpreters.append(
            Interpreter(version, ROOTED_PYTHON.format(version=version), root_runner=PY314_RUN)
        )
    return interpreters


def describe(interpreter: Interpreter) -> str:
    where = f" inside {interpreter.root_runner}" if interpreter.root_runner else ""
    return f"{interpreter.executable}{where}"


@functools.cache
def find(version: str) -> Interpreter | None:
    return next((i for i in candidates(version) if _reports_version(i)), None)
