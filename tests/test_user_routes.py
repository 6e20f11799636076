"""What a user adds to the routes is served as FastAPI serves it, on every engine.

A rendered project edited as a user would: a dependency that answers 401 on a route of
the template's `app/api/health.py` and on the whole router of `app/api/demo.py`, and a
router of their own in `app/routes/` guarded the same way. Each engine must answer 401
without the token and 200 with it. The project's differential routing test
(tests/test_routing.py) also runs at the lowest FastAPI the rendered pyproject allows.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from extensions.matrix import loops
from tests.conftest import DEFAULT_PYTHON, environment_for, server_process

GUARD = '''
from fastapi import Depends, Header, HTTPException


def require_token(authorization: str = Header(default="")) -> None:
    if authorization != "Bearer letmein":
        raise HTTPException(status_code=401, detail="Not authenticated")
'''
USER_ROUTER = '''"""A user's router."""
from fastapi import APIRouter, Depends

from app.api.health import require_token

router = APIRouter(prefix="/accounts", dependencies=[Depends(require_token)])


@router.get("/{account_id}")
async def account(account_id: int) -> dict[str, int]:
    return {"account_id": account_id}
'''
TOKEN = {"Authorization": "Bearer letmein"}
GUARDED = ["/health/detailed", "/demo/items/1", "/accounts/7"]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer has {old!r}"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def edited_project(copie_session) -> Path:
    result = copie_session.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    health, demo = project / "app/api/health.py", project / "app/api/demo.py"
    edit(health, "from app.core.settings import get_settings\n",
         "from app.core.settings import get_settings\n" + GUARD)
    edit(health, '@router.get("/detailed")',
         '@router.get("/detailed", dependencies=[Depends(require_token)])')
    edit(demo, "from app.core.framework import APIRouter, Query, Request, StreamingResponse\n",
         "from app.core.framework import APIRouter, Query, Request, StreamingResponse\n"
         "from fastapi import Depends\n\n"
         "from app.api.health import require_token\n")
    edit(demo, 'APIRouter(prefix="/demo", tags=["demo"])',
         'APIRouter(prefix="/demo", tags=["demo"], dependencies=[Depends(require_token)])')
    (project / "app/routes/accounts.py").write_text(USER_ROUTER)
    return project


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_a_401_dependency_guards_template_and_user_routes(edited_project: Path,
                                                          engine: str) -> None:
    interpreter, python = environment_for(DEFAULT_PYTHON, edited_project / "pyproject.toml")
    runner = interpreter.command([str(python)], edited_project)
    with server_process.running_server(["--engine", engine], python=runner, cwd=edited_project,
                                       env={"WEBSERVER_EXAMPLES": "true"}) as server:
        refused = {path: httpx.get(server.url + path).status_code for path in GUARDED}
        allowed = {path: httpx.get(server.url + path, headers=TOKEN).status_code
                   for path in GUARDED}
        open_route = httpx.get(f"{server.url}/health/").status_code
    assert refused == dict.fromkeys(GUARDED, 401)
    assert allowed == dict.fromkeys(GUARDED, 200)
    assert open_route == 200


def fastapi_floor(pyproject: Path) -> str:
    for line in re.findall(r'^\s*"(fastapi[^"]*)"', pyproject.read_text(), re.M):
        requirement = Requirement(line)
        floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if requirement.name == "fastapi" and floors:
            return floors[0]
    raise AssertionError("the rendered pyproject.toml states no FastAPI floor (fastapi>=X)")


@pytest.mark.parametrize("bound", ["lowest", "newest"])
def test_routing_equivalence_at_both_ends_of_the_fastapi_range(edited_project: Path,
                                                                bound: str) -> None:
    pyproject = edited_project / "pyproject.toml"
    floor = fastapi_floor(pyproject)
    pins = (f"fastapi=={floor}",) if bound == "lowest" else ()
    interpreter, python = environment_for(DEFAULT_PYTHON, pyproject, pins)
    version = subprocess.run(interpreter.command(
        [str(python), "-c", "import fastapi; print(fastapi.__version__)"]),
        capture_output=True, text=True, check=True).stdout.strip()
    if bound == "lowest":
        assert version == floor
    else:
        assert version != floor
    tests = subprocess.run(
        interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_routing.py"], edited_project),
        cwd=edited_project, capture_output=True, text=True, timeout=120)
    assert tests.returncode == 0, f"FastAPI {version}:\n{tests.stdout[-4000:]}"
