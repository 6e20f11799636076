"""The framework answer: a notslowapi project passes its own tests on every engine, holds
no upstream fastapi or starlette, and `copier update --data framework=...` moves a
user's imports (or stops with nothing written)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import (
    DEFAULT_PYTHON,
    FULL_MATRIX,
    NEWEST_PYTHON,
    environment_for,
    git,
    project_with_router,
    server_process,
    update,
)
from tests.test_database import assert_database_tests_ran

RUFF = str(Path(sys.executable).with_name("ruff"))
NOTSLOWAPI = {"framework": "notslowapi"}
# `make test` runs the project's framework tests on the default Python; `make test-all`
# the quick tests whole on the newest, which notslowapi's own CI does not run, in a
# project with SQLite: its database tests on every engine, and what a database changes
# in the rest (PostgreSQL's server cannot run in the newest Python's root: its own are
# in test_database.py). Every engine serves a notslowapi project on every Python in
# test_combinations (the asyncio cells).
SELECTION = (([], {"python_version": NEWEST_PYTHON, "database": "sqlite"})
             if FULL_MATRIX else (["tests/test_framework.py"], {}))
USER_ROUTER = '''from fastapi import APIRouter, HTTPException
from starlette.responses import PlainTextResponse

router = APIRouter(prefix="/shop")


@router.get("/items/{item_id}")
async def item(item_id: int) -> PlainTextResponse:
    if item_id == 0:
        raise HTTPException(status_code=409, detail="taken")
    return PlainTextResponse(f"item {item_id}")
'''


def run_own_tests(project: Path, python_version: str, selection: list[str]) -> str:
    interpreter, python = environment_for(python_version, project / "pyproject.toml")
    foreign = subprocess.run(
        interpreter.command([str(python), "-c", "import importlib.util as u; print("
                             "[m for m in ('fastapi', 'starlette') if u.find_spec(m)])"],
                            project), capture_output=True, text=True, check=True)
    assert foreign.stdout.strip() == "[]", foreign.stdout  # nothing of upstream installed
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *selection], project),
        cwd=project, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    return tests.stdout


def test_a_notslowapi_project_passes_its_own_tests(copie) -> None:
    selection, answers = SELECTION
    python_version = str(answers.get("python_version", DEFAULT_PYTHON))
    result = copie.copy(extra_answers={**NOTSLOWAPI, **answers})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    lint = subprocess.run([RUFF, "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    pyproject = (project / "pyproject.toml").read_text()
    assert '"notslowapi>=' in pyproject and '"fastapi' not in pyproject
    out = run_own_tests(project, python_version, ["-rs", *selection])
    assert " passed" in out and " failed" not in out, out[-2000:]
    if "database" in answers:
        assert_database_tests_ran(out)


def test_update_moves_a_users_imports_to_notslowapi_and_back(copie) -> None:
    project = project_with_router(copie, USER_ROUTER)

    moved = update(project, framework="notslowapi")
    report = moved.stdout + moved.stderr
    assert moved.returncode == 0, report
    assert "app/routes/shop.py: imports moved to notslowapi" in report, report
    assert "app/custom.py: imports moved to notslowapi" in report, report
    shop = (project / "app/routes/shop.py").read_text()
    assert shop.startswith("from notslowapi import APIRouter, HTTPException\n"
                           "from notslowapi.starlette.responses import PlainTextResponse\n")
    _, python = environment_for(DEFAULT_PYTHON, project / "pyproject.toml")
    with server_process.running_server(python=[str(python)], cwd=project) as server:
        answers = [httpx.get(f"{server.url}/shop/items/{n}") for n in (7, 0)]
    assert (answers[0].status_code, answers[0].text) == (200, "item 7")
    assert answers[1].status_code == 409  # an upstream HTTPException here answered 500

    git(project, "add", "-A")
    git(project, "commit", "-qm", "On notslowapi")
    back = update(project, framework="fastapi")
    assert back.returncode == 0, back.stdout + back.stderr
    assert (project / "app/routes/shop.py").read_text() == USER_ROUTER


def test_update_stops_with_nothing_written_on_an_import_it_cannot_move(copie) -> None:
    project = project_with_router(copie, "import fastapi\n\nrouter = fastapi.APIRouter()\n")
    stopped = update(project, framework="notslowapi")
    assert stopped.returncode != 0
    assert ("app/routes/shop.py line 1 imports fastapi as a module, which this update "
            "cannot rewrite") in stopped.stderr, stopped.stderr
    assert git(project, "status", "--porcelain").stdout == ""  # nothing written
    assert "framework: fastapi" in (project / ".copier-answers.yml").read_text()
