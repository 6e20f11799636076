"""The database answer: `copier update --data database=...` adds one to a project with a
user's router, which then passes its database tests against a real PostgreSQL (or a
SQLite file) on every engine; a driver that cannot run on an answered loop is refused
at `copier copy` with one sentence and nothing written."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    DEFAULT_PYTHON,
    FULL_MATRIX,
    environment_for,
    full_only,
    project_with_router,
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
# `make test`: the database's own tests (the engines' on the default one) and the
# layers'; `make test-all`, every engine, and on PostgreSQL the tests of what the
# database changes: the boots, the probes, the settings and their help, the routes,
# the served loops and the text.
TOUCHED = ["tests/test_database.py", "tests/test_import_graph.py"]
ON_ONE_ENGINE = ["-k", "not every_engine or uvicorn"]
CHANGED = [*TOUCHED, "tests/test_boot.py", "tests/test_exposure.py", "tests/test_settings.py",
           "tests/test_cli_help.py", "tests/test_routing.py", "tests/test_loops.py",
           "tests/test_text.py"]


@pytest.mark.parametrize("database", ["postgresql", full_only("sqlite")])
def test_an_update_adds_a_database_that_every_engine_serves(copie, database: str) -> None:
    if database == "postgresql" and not postgresql_here():
        if os.environ.get("REQUIRE_POSTGRESQL"):
            pytest.fail("no PostgreSQL server here (REQUIRE_POSTGRESQL is set)")
        pytest.skip("no PostgreSQL server here: apt-get install postgresql")
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
    selection = ((CHANGED if database == "postgresql" else TOUCHED) if FULL_MATRIX
                 else [*TOUCHED, *ON_ONE_ENGINE])
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                             *selection], project),
        cwd=project, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    skipped = [line for line in tests.stdout.splitlines()
               if line.startswith("SKIPPED") and "test_database.py" in line]
    assert " passed" in tests.stdout and not skipped, skipped or tests.stdout[-2000:]


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
