"""The rendered systemd unit (deploy/systemd/): accepted by `systemd-analyze verify`
without a warning, its stop timeout the Kubernetes grace computation, its reload a
SIGHUP, its hardening scored offline; and the engines serving under the kernel's
MemoryDenyWriteExecute (PR_SET_MDWE), which the unit sets. Not run under systemd:
the machines this suite runs on need not boot with it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
import yaml

from extensions.matrix import loops, setting_specs
from tests.conftest import DEFAULT_PYTHON, environment_for, rendered, server_process

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
# The host's unit directory: the targets and slices the unit's default dependencies name.
SYSTEM_UNITS = next((p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system"))
                     if (p / "multi-user.target").exists()), None)
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None or SYSTEM_UNITS is None,
    reason="systemd-analyze and the host's unit directory are needed")
# Most exposure `systemd-analyze security` may score (0 is best, 10 worst; the unit
# scores 1.4 with systemd 252).
MAX_EXPOSURE = 2.0


def unit_path(project: Path) -> Path:
    (unit,) = (project / "deploy/systemd").glob("*.service")
    return unit


def directives(unit: Path) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> values, in order (a key may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    section = ""
    for line in unit.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            sections[section] = {}
            continue
        key, _, value = line.partition("=")
        sections[section].setdefault(key, []).append(value)
    return sections


def root_with(unit: Path, executables: list[str], tmp_path: Path) -> Path:
    """A root tree in which the unit's commands exist, with the host's units beside it."""
    root = tmp_path / "root"
    for command in executables:
        path = root / command.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    installed = root / "etc/systemd/system" / unit.name
    installed.parent.mkdir(parents=True)
    shutil.copy(unit, installed)
    return root


@needs_systemd_analyze
@pytest.mark.parametrize("database", ["none", "sqlite", "postgresql"])
def test_the_unit_verifies_and_stops_within_the_kubernetes_grace(copie, tmp_path: Path,
                                                                 database: str) -> None:
    _, project = rendered(copie, {"database": database})
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    slug = pyproject["name"]
    unit = unit_path(project)
    assert unit.name == f"{slug}.service"
    service = directives(unit)["Service"]

    # It runs the project's own command, from the project's directory.
    home = service["WorkingDirectory"][0]
    assert service["ExecStart"] == [f"{home}/.venv/bin/{slug} serve"]
    assert slug in pyproject["scripts"]
    assert service["Type"] == ["exec"]
    assert service["EnvironmentFile"][0].startswith("-")  # optional

    # Stop: SIGTERM to the launcher, which drains and stops its workers; the timeout
    # is the pod's grace period without the preStop pause (deploy/kubernetes).
    deployment = yaml.safe_load((project / "deploy/kubernetes/deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    pause = int(pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][-1])
    grace = int(setting_specs.BY_NAME["graceful_timeout"].default)
    assert service["KillSignal"] == ["SIGTERM"] and service["KillMode"] == ["mixed"]
    assert int(service["TimeoutStopSec"][0]) == pod["terminationGracePeriodSeconds"] - pause
    assert int(service["TimeoutStopSec"][0]) > grace
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert service["Restart"] == ["on-failure"]
    assert service["MemoryDenyWriteExecute"] == ["yes"]
    # A database's migrations before each start; SQLite's file where the service may write.
    migrate = [f"{home}/.venv/bin/alembic upgrade head"] if database != "none" else []
    assert service.get("ExecStartPre", []) == migrate
    if database == "sqlite":
        assert service["StateDirectory"] == [slug]
        assert (f"WEBSERVER_DATABASE_URL=sqlite+aiosqlite:////var/lib/{slug}/app.db"
                in service["Environment"])

    # verify checks that the commands exist: in a root holding them, not on this host.
    executables = [value.split()[0] for key in ("ExecStart", "ExecReload", "ExecStartPre")
                   for value in service.get(key, [])]
    root = root_with(unit, executables, tmp_path)
    installed = root / "etc/systemd/system" / unit.name
    check = subprocess.run([SYSTEMD_ANALYZE, "verify", f"--root={root}", "--man=no",
                            str(installed)], capture_output=True, text=True)
    said = [line for line in (check.stdout + check.stderr).splitlines() if unit.name in line]
    assert check.returncode == 0 and said == [], check.stdout + check.stderr

    security = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", f"--root={root}",
                               "--no-pager", unit.name], capture_output=True, text=True)
    if "--offline" in security.stderr and "unrecognized" in security.stderr:
        return  # systemd older than 250: no offline review
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout)
    assert found, security.stdout + security.stderr
    assert float(found.group(1)) <= MAX_EXPOSURE, security.stdout


MDWE_EXEC = """
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, REFUSE_EXEC_GAIN
    raise OSError(ctypes.get_errno(), "PR_SET_MDWE")
os.execvp(sys.argv[1], sys.argv[1:])
"""


def kernel_has_mdwe() -> bool:
    probe = subprocess.run([sys.executable, "-c", MDWE_EXEC, "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(sys.platform != "linux" or not kernel_has_mdwe(),
                    reason="PR_SET_MDWE needs Linux 6.3 or newer")
@pytest.mark.parametrize("engine", loops.ENGINES)
def test_every_engine_serves_without_writable_executable_memory(copie, engine: str) -> None:
    """What MemoryDenyWriteExecute=yes refuses (systemd 253 and newer apply it with
    this very prctl; older ones with a seccomp filter refusing the same mappings),
    inherited by the launcher's workers and its metrics listener."""
    _, project = rendered(copie, {})
    interpreter, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml")
    runner = [sys.executable, "-c", MDWE_EXEC, *interpreter.command([str(python)], project)]
    with server_process.running_server(["--engine", engine, "--workers", "2"],
                                       python=runner, cwd=project) as server:
        assert httpx.get(f"{server.url}/health/", timeout=5).status_code == 200
        assert "webserver_info" in httpx.get(server.metrics_url, timeout=5).text
