"""The project imports one framework: in a notslowapi project, no module of app/ or
tests/ imports upstream fastapi or starlette (the two Starlettes mix silently: an
HTTPException answers 500, a Response is sent as JSON), and `serve` refuses to start
with a sentence naming the file, the line and the replacement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.core import framework
from tests.server_process import PROJECT_DIR, free_port, running_server

OTHER = next(iter(framework.FOREIGN))  # upstream starlette's package, or notslowapi


def test_the_project_imports_no_other_framework() -> None:
    assert framework.foreign_imports(PROJECT_DIR) == []


def test_an_import_of_the_other_framework_is_named_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "app" / "routes").mkdir(parents=True)
    (tmp_path / "app" / "routes" / "x.py").write_text(
        f"import json\n\nfrom {OTHER}.responses import PlainTextResponse\n")
    instead = framework.FOREIGN[OTHER]
    assert framework.foreign_imports(tmp_path) == [
        f"app/routes/x.py line 3 imports {OTHER}.responses, which this "
        f"{framework.FRAMEWORK} project must not mix with its own: import "
        f"{instead}.responses instead"]


def full_width_first(name: str) -> str:
    """`name` with its first letter full-width, which Python folds back into it (NFKC)."""
    return chr(ord(name[0]) - ord("a") + ord("\uff41")) + name[1:]


# Spellings of one import, each on line 1, that `serve` must read its module for.
SPELLINGS = {
    "after another": f"import json, {OTHER}.responses\n",
    "wrapped": f"import json, \\\n    {OTHER}.responses\n",
    "after code": f"x = 1; import {OTHER}.responses\n",
    "full-width": f"import {full_width_first(OTHER)}.responses\n",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_an_import_is_found(tmp_path: Path, spelling: str) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text(SPELLINGS[spelling], encoding="utf-8")
    assert [found.split(", which")[0] for found in framework.foreign_imports(tmp_path)] == [
        f"app/x.py line 1 imports {OTHER}.responses"]


def test_a_name_that_only_contains_the_other_framework_is_not_an_import(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text(
        f"import {OTHER}_extras\nfrom my.{OTHER} import thing\n# import {OTHER}\n")
    assert framework.foreign_imports(tmp_path) == []


@pytest.mark.skipif(framework.FRAMEWORK != "notslowapi", reason="a notslowapi project's check")
def test_serve_refuses_upstream_starlette_in_your_routes() -> None:
    route = PROJECT_DIR / "app" / "routes" / "framework_test_route.py"
    route.write_text("from starlette.responses import PlainTextResponse\n")
    try:
        refused = subprocess.run([sys.executable, "-m", "cli", "serve", "--port", str(free_port())],
                                 cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60)
    finally:
        route.unlink()
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "Cannot start: app/routes/framework_test_route.py line 1 imports "
        "starlette.responses, which this notslowapi project must not mix with its own: "
        "import notslowapi.starlette.responses instead."]


@pytest.mark.skipif(framework.FRAMEWORK != "fastapi", reason="a FastAPI project's check")
def test_a_fastapi_project_serves_upstream_starlette_in_your_routes() -> None:
    route = PROJECT_DIR / "app" / "routes" / "framework_test_route.py"
    route.write_text(
        "from fastapi import APIRouter\nfrom starlette.responses import PlainTextResponse\n\n"
        "router = APIRouter()\n\n\n@router.get('/framework-test')\n"
        "async def plain() -> PlainTextResponse:\n    return PlainTextResponse('plain')\n")
    try:
        with running_server() as server:
            answer = httpx.get(f"{server.url}/framework-test")
    finally:
        route.unlink()
    assert (answer.status_code, answer.text) == (200, "plain")
