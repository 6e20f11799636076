"""The database answer: `copier update --data database=...` adds one to a project with a
user's router, which then passes its database tests against a real PostgreSQL (or a
SQLite file) on every engine; a driver that cannot run on an answered loop is refused
at `copier copy` with one sentence and nothing written."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests import containers
from tests.conftest import (
    DEFAULT_PYTHON,
    FULL_MATRIX,
    environment_for,
    full_only,
    project_with_router,
    rendered,
    server_process,
    update,
)


def postgresql_here() -> bool:
    return bool(shutil.which("pg_ctl") or glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))


COPIER = str(Path(sys.executable).with_name("copier"))
RUFF = str(Path(sys.executable).with_name("ruff"))
USER_ROUTER = '''from fastapi import APIRouter

router = APIRouter(prefix="/shop")


@router.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item_id": item_id}
'''
# The database's own tests and the layers', on one engine in `make test`. In `make
# test-all`, PostgreSQL's on every engine, and the loops it serves (it cannot serve
# rloop); what any database changes in the rest (boots, probes, settings and their
# help, routes, text) runs in the notslowapi project on the newest Python, with SQLite
# (test_framework.py), whose quick tests run whole anyway.
TOUCHED = ["tests/test_database.py", "tests/test_import_graph.py"]
ON_ONE_ENGINE = [*TOUCHED, "-k", "not every_engine or uvicorn"]
POSTGRESQL_FULL = [*TOUCHED, "tests/test_loops.py"]


@pytest.mark.parametrize("database", ["postgresql", full_only("sqlite")])
def test_an_update_adds_a_database_that_the_project_serves(copie, database: str) -> None:
    if database == "postgresql":
        require_postgresql()
    project = project_with_router(copie, USER_ROUTER)

    added = update(project, database=database)
    assert added.returncode == 0, added.stdout + added.stderr
    assert (project / "app/routes/shop.py").read_text() == USER_ROUTER
    for path in ("alembic.ini", "alembic/env.py", "app/db/models.py", "tests/test_database.py",
                 "app/api/stored_items.py"):
        assert (project / path).is_file(), path
    assert "WEBSERVER_DATABASE_URL" in (project / ".env.example").read_text()
    # The loops the driver cannot run leave what the project serves, not its answer.
    answers = (project / "app/core/answers.py").read_text()
    served = ("asyncio,uvloop,zuvloop" if database == "postgresql"
              else "asyncio,uvloop,rloop,zuvloop")
    assert f'"served_loops": "{served}"' in answers, answers
    lint = subprocess.run([RUFF, "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout

    interpreter, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml")
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                             *(POSTGRESQL_FULL if FULL_MATRIX and database == "postgresql"
                               else ON_ONE_ENGINE)], project),
        cwd=project, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert_database_tests_ran(tests.stdout)


def require_postgresql() -> None:
    if not postgresql_here():
        if os.environ.get("REQUIRE_POSTGRESQL"):
            pytest.fail("no PostgreSQL server here (REQUIRE_POSTGRESQL is set)")
        pytest.skip("no PostgreSQL server here: apt-get install postgresql")


def assert_database_tests_ran(output: str) -> None:
    """The project's pytest output (-rs): passed, and none of its database tests skipped."""
    skipped = [line for line in output.splitlines()
               if line.startswith("SKIPPED") and "test_database.py" in line]
    assert " passed" in output and not skipped, skipped or output[-2000:]


@pytest.mark.parametrize(("answers", "said"), [
    ({"default_engine": "granian", "loop_policy": "rloop", "database": "postgresql"},
     "postgresql cannot be served on rloop: asyncpg cannot connect on rloop"),
    ({"default_engine": "hypercorn", "loop_policy": "trio", "database": "sqlite"},
     "sqlite cannot be served on trio: SQLAlchemy's asyncio engine and aiosqlite need an "
     "asyncio event loop"),
], ids=["rloop-postgresql", "trio-sqlite"])
def test_a_driver_on_a_loop_it_cannot_run_is_refused(tmp_path: Path, answers: dict[str, str],
                                                      said: str) -> None:
    data = [part for name, value in answers.items() for part in ("--data", f"{name}={value}")]
    refused = subprocess.run([COPIER, "copy", "--trust", "--defaults", "--vcs-ref", "HEAD",
                              *data, str(Path(__file__).parents[1]), str(tmp_path / "p")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert said in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())


def test_the_compose_file_migrates_before_the_service_starts(copie) -> None:
    """The local compose file (not run here: no registry for the postgres image): the
    service and the migrations on the Dockerfile's image, reaching the database service
    by its name, in order: database healthy, migrations done, service."""
    answers, project = rendered(copie, {"database": "postgresql"})
    services = yaml.safe_load((project / "compose.yaml").read_text())["services"]
    database, migrate, service = services["database"], services["migrate"], services["service"]
    env = database["environment"]
    url = (f"postgresql+asyncpg://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
           f"@database:5432/{env['POSTGRES_DB']}")
    assert migrate["environment"]["WEBSERVER_DATABASE_URL"] == url
    assert service["environment"]["WEBSERVER_DATABASE_URL"] == url
    assert migrate["build"] == "." and service["image"] == migrate["image"]
    assert migrate["command"] == ["alembic", "upgrade", "head"]
    assert migrate["depends_on"] == {"database": {"condition": "service_healthy"}}
    assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert service["ports"] == [f"127.0.0.1:{answers['port']}:{answers['port']}"]
    assert not (rendered(copie, {"database": "sqlite"})[1] / "compose.yaml").exists()


# Started in the project, with its own helper (tests/postgres.py): the URL on a line.
POSTGRES_FOR_THE_TEST = """
import signal
from tests import postgres
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # taken by sigwait below
with postgres.running() as server:
    print(server.url, flush=True)
    signal.sigwait({signal.SIGTERM})
"""


@contextlib.contextmanager
def postgresql_for(project: Path) -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 (the project's tests/postgres.py); its URL."""
    started = subprocess.Popen([sys.executable, "-c", POSTGRES_FOR_THE_TEST], cwd=project,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert started.stdout is not None
        url = started.stdout.readline().strip()
        assert url.startswith("postgresql"), url + started.stdout.read()
        yield url
    finally:
        started.terminate()
        started.wait(timeout=60)


@pytest.mark.parametrize("database", [full_only("postgresql")])
def test_the_image_migrates_and_serves_the_database(copie, database: str) -> None:
    """The Dockerfile's image: the migrations as the Job runs them, then the service on a
    real PostgreSQL (host network: the server listens on 127.0.0.1 only)."""
    answers, project = rendered(copie, {"database": database})
    why_not = containers.missing(str(answers["python_version"]))
    if why_not:
        if containers.REQUIRED:
            pytest.fail(f"{why_not}; REQUIRE_CONTAINERS is set")
        pytest.skip(why_not)
    if not postgresql_here():
        pytest.skip("no PostgreSQL server here: apt-get install postgresql")
    image = "localhost/cfe-test-database:latest"
    print(f"built in {containers.build(project, image):.1f} s")
    name, port = "cfe-test-database", server_process.free_port()
    with postgresql_for(project) as url:
        env = ["-e", f"WEBSERVER_DATABASE_URL={url}"]
        migrated = containers.podman("run", "--rm", "--network", "host", *env, image,
                                     "alembic", "upgrade", "head", check=False, timeout=120)
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        assert "Running upgrade  -> 0001" in migrated.stderr, migrated.stderr
        containers.podman(
            "run", "-d", "--name", name, "--network", "host", *env,
            "-e", f"WEBSERVER_PORT={port}", "-e", "WEBSERVER_HOST=127.0.0.1",
            "-e", f"WEBSERVER_METRICS_PORT={server_process.free_port(besides=port)}",
            "-e", "WEBSERVER_EXAMPLES=true", "-e", "WEBSERVER_ALLOWED_HOSTS=127.0.0.1", image)
        try:
            container = containers.Container(name, f"http://127.0.0.1:{port}")
            containers.wait_until_serving(container, 30)
            added = httpx.post(f"{container.url}/demo/db/items", json={"name": "imaged"})
            assert added.status_code == 201, added.text
            read = httpx.get(f"{container.url}/demo/db/items/{added.json()['id']}")
            assert read.json() == added.json()
            assert httpx.get(f"{container.url}/readyz").status_code == 200
        finally:
            containers.podman("rm", "--force", "--time", "0", name, check=False)
