"""A production install, made as its user makes it: the project installed without its
dev group (`pip install .`), run by its console script from a directory that is not the
project. Every production command works there, and every start that cannot work is
one sentence and exit code 2, on both engines.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from extensions.matrix import loops, slugify
from tests.conftest import COPIER_DEFAULTS, require_interpreter, served_loop, server_process
from tests.project_envs import UV, UV_ENV

PYTHON = COPIER_DEFAULTS["python_version"]
SLUG = slugify(COPIER_DEFAULTS["project_name"])
DEV_ONLY = ("pytest", "httpx", "ruff")  # the rendered project's dev group


@pytest.fixture(scope="module")
def production(copie_session, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the console script, an empty working directory) of a no-dev install."""
    result = copie_session.copy()
    assert result.exit_code == 0, result.exception
    interpreter = require_interpreter(PYTHON)
    venv = tmp_path_factory.mktemp("production") / "venv"
    for argv in (
        [UV, "venv", "--quiet", "--python", interpreter.executable, str(venv)],
        [UV, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         str(result.project_dir)],
    ):
        subprocess.run(interpreter.command(argv), check=True, env=UV_ENV)
    workdir = tmp_path_factory.mktemp("workdir")
    return venv / "bin" / SLUG, workdir


def run(production: tuple[Path, Path], *args: str, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    script, workdir = production
    return subprocess.run([str(script), *args], cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_no_dev_dependency_is_installed(production: tuple[Path, Path]) -> None:
    python = production[0].with_name("python")
    for module in DEV_ONLY:
        probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
        assert probe.returncode != 0, f"{module} is installed: this is not a production install"


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_serves_on_each_engine(production: tuple[Path, Path], engine: str) -> None:
    script, workdir = production
    with server_process.running_server(["--engine", engine], program=[str(script)],
                                       cwd=workdir,
                                       env={"WEBSERVER_HEALTH_DETAIL": "full"}) as server:
        detail = server_process.httpx.get(f"{server.url}/health/detailed").json()
    assert detail["engine"] == engine
    assert detail["loop"] == served_loop(COPIER_DEFAULTS["loop_policy"], engine,
                                         COPIER_DEFAULTS["python_version"])
    assert server.process.returncode in (0, -15)


def test_engines_and_bench_engines_run(production: tuple[Path, Path]) -> None:
    engines = run(production, "engines")
    assert engines.returncode == 0, engines.stderr
    assert all(engine in engines.stdout for engine in loops.ENGINES)
    bench = run(production, "bench", "engines", "--engine", loops.ENGINES[-1],
                "--driver", "python", "--duration", "1", "--warmup", "0",
                "-c", "4", "--json", "bench.json")
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    figures = json.loads((production[1] / "bench.json").read_text())
    assert "requests/s" in bench.stdout and figures


def listening_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


# (case, serve arguments, environment, .env text, the sentence's start after "Cannot start: ")
FAILURES = [
    ("unresolvable-host", ["--host", "not..a..host"], {}, None,
     "the host 'not..a..host' cannot be resolved"),
    ("unassignable-host", ["--host", "192.0.2.1"], {}, None,
     "the host '192.0.2.1' is not an address of this machine"),
    ("unknown-name-in-environment", [], {"WEBSERVER_WORKER": "4"}, None,
     "WEBSERVER_WORKER (in the environment) is not a setting of this service; "
     "did you mean WEBSERVER_WORKERS?"),
    ("unknown-name-in-env-file", [], {}, "WEBSERVER_PORTS=9000\n",
     "WEBSERVER_PORTS (in .env) is not a setting of this service; "
     "did you mean WEBSERVER_PORT?"),
    ("renamed-name", [], {"WEBSERVER_FORWARDED_ALLOW_IPS": "10.0.0.0/8"}, None,
     "WEBSERVER_FORWARDED_ALLOW_IPS (in the environment) was renamed "
     "WEBSERVER_TRUSTED_PROXIES"),
    ("port-in-use", [], {}, None, "port {port} on 127.0.0.1 is already in use"),
    ("privileged-port", ["--port", "80"], {}, None, "port 80 is a privileged port"),
]


@pytest.mark.parametrize("engine", loops.ENGINES)
@pytest.mark.parametrize(("case", "args", "env", "env_file", "sentence"), FAILURES,
                         ids=[case[0] for case in FAILURES])
def test_a_start_that_cannot_work_is_one_sentence_and_exit_2(
    production: tuple[Path, Path], engine: str, case: str, args: list[str],
    env: dict[str, str], env_file: str | None, sentence: str,
) -> None:
    if case == "privileged-port" and os.geteuid() == 0:
        pytest.skip("root may listen on any port; the container test (uid 10001) covers it")
    holder, port = listening_port()
    env_path = production[1] / ".env"
    try:
        if env_file is not None:
            env_path.write_text(env_file)
        result = run(production, "serve", "--engine", engine, "--host", "127.0.0.1",
                     "--port", str(port), *args, env=env)
    finally:
        holder.close()
        env_path.unlink(missing_ok=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert lines == [lines[0]] and "Traceback" not in result.stdout + result.stderr, lines
    assert lines[0].startswith("Cannot start: " + sentence.format(port=port)), lines[0]
