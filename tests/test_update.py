"""`copier update` a user can trust, from every release and from the working tree.

For representative answer sets, a project is rendered at each earlier release (and at
this working tree), given the edits a user typically makes there, committed, and
updated to this working tree with one answer changed, with Copier's own command line.
Then: no conflict (or, from a release made before the extension points existed, at
most one, reported with a non-zero exit), the user's edits kept, every other file as
a fresh render, and the changed answer served by a booted server.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from packaging.version import Version

from tests.conftest import (
    COPIER_DEFAULTS,
    TEMPLATE_ROOT,
    environment_for,
    full_only,
    require_interpreter,
    served_loop,
    server_process,
)
from tests.project_envs import UV, UV_ENV
from tests.releases import releases_before_head

COPIER = str(Path(sys.executable).with_name("copier"))
# name -> (answers, the one answer changed by the update)
ANSWER_SETS = {
    "defaults": ({}, {"default_engine": "granian"}),
    "granian-rloop": ({"project_name": "Update Me", "python_version": "3.12",
                       "default_engine": "granian", "loop_policy": "rloop", "port": 8123,
                       "workers": 2}, {"loop_policy": "uvloop"}),
    "py314-zuvloop": ({"python_version": "3.14", "loop_policy": "zuvloop"},
                      {"loop_policy": "asyncio"}),
}
RELEASES = releases_before_head(TEMPLATE_ROOT)
OLDEST_NEWEST = list(dict.fromkeys([*RELEASES[:1], *RELEASES[-1:]]))
# Each release's migrations run on the way from it, so `make test-all` updates from
# every release with the defaults; the other answer sets differ in what the answers
# render, and start from the oldest release (every migration on the way), the newest
# and HEAD. `make test` keeps the oldest, the newest and HEAD with the defaults, and
# the oldest (every migration, then the changed answer) with the others.
CASES = [
    *(full_only("defaults", source, full=source not in OLDEST_NEWEST)
      for source in [*RELEASES, "HEAD"]),
    *(full_only(name, source, full=source not in RELEASES[:1])
      for name in ANSWER_SETS if name != "defaults"
      for source in [*OLDEST_NEWEST, "HEAD"]),
]
USER_SECTION = "\n## Deploying at ACME\n\nBehind the ACME load balancer, on port 9100.\n"
USER_DEPENDENCY = "tenacity>=8"
USER_SETTING = "APP_GREETING=hi"  # read by the user's AppSettings (app/custom.py)
RENAMED = ("WEBSERVER_FORWARDED_ALLOW_IPS", "WEBSERVER_TRUSTED_PROXIES", Version("0.2.0"))
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")
# Releases made before the extension points (0.4.0) had users register routers in
# app/main.py; 0.2.0 added its demo router on the very line users added theirs after,
# so an update from 0.1.0 conflicts there, once, and says so (docs/index.md).
# Before 0.4.0 the user's router and middleware were registered in the template's own
# app/main.py and app/middleware/__init__.py, lines later releases change too.
EXTENSION_POINTS = Version("0.4.0")
# Up to this release .env held the answers; its migration writes .env anew from the
# template's (migrations/env_answers_to_defaults.py). From it on, no update writes .env.
ENV_REWRITTEN_BEFORE = Version("0.4.0")
KNOWN_CONFLICTS = ["app/main.py", "app/middleware/__init__.py"]
ROUTER = '''from fastapi import APIRouter

router = APIRouter()


@router.get("/items/ping")
async def ping() -> dict[str, str]:
    return {"pong": "kept"}
'''
SETTING_ROUTE = '''

@router.get("/items/greeting")
async def greeting() -> dict[str, str]:
    from app.custom import get_app_settings

    return {"greeting": get_app_settings().greeting}
'''
LIFESPAN_ROUTE = '''

@router.get("/items/opened")
async def opened(request: Request) -> dict[str, str]:
    return {"pool": request.state.pool}
'''
EMPTY_LIFESPAN = "    yield {}\n"  # app/custom.py's lifespan since 0.10.0
USER_TEST = '''from fastapi.testclient import TestClient

from app.main import create_app


def test_the_items_router_answers_through_the_users_middleware() -> None:
    with TestClient(create_app(), base_url="http://localhost") as client:
        answer = client.get("/items/ping")
    assert answer.json() == {"pong": "kept"} and answer.headers["x-user"] == "kept"
'''
MIDDLEWARE = '''"""Marks every HTTP response: the user's own middleware."""

from __future__ import annotations

from starlette.types import Scope

from app.middleware.start_headers import StartHeadersMiddleware


class UserHeaderMiddleware(StartHeadersMiddleware):
    def response_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        return [(b"x-user", b"kept")]
'''


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=user", "-c", "user.email=user@example.com", *args],
                   cwd=project, check=True, capture_output=True)


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(errors="replace")
            for p in sorted(root.rglob("*"))
            if p.is_file() and not {".git", "__pycache__"} & set(p.parts)}


def release_version(source: str) -> Version:
    return Version("999") if source == "HEAD" else Version(source)


def register_in_custom(project: Path, setting: bool) -> None:
    """The user's middleware (and setting) in app/custom.py, where they go since 0.4.0."""
    custom = project / "app/custom.py"
    text = custom.read_text()
    empty = next(line for line in ("MIDDLEWARE: tuple[type, ...] = ()",  # before 0.8.0
                                   "MIDDLEWARE: tuple[object, ...] = ()") if line in text)
    text = (text.replace(empty, empty.replace("()", "(UserHeaderMiddleware,)"))
            .replace("from pydantic_settings import BaseSettings, SettingsConfigDict\n",
                     "from pydantic_settings import BaseSettings, SettingsConfigDict\n\n"
                     "from app.middleware.user_header import UserHeaderMiddleware\n"))
    if setting:
        text = text.replace('extra="ignore")\n', 'extra="ignore")\n\n    greeting: str = "hello"\n')
    # A pool of theirs, opened in the lifespan and read by a route (request.state).
    text = text.replace(EMPTY_LIFESPAN, '    yield {"pool": "opened"}\n')
    custom.write_text(text)


def add_router_and_middleware(project: Path) -> set[str]:
    """The user's router and middleware, where the project says they go; files touched."""
    (project / "app/middleware/user_header.py").write_text(MIDDLEWARE)
    if (project / "app/routes").is_dir():  # extension points: files the template never writes
        lifespan = EMPTY_LIFESPAN in (project / "app/custom.py").read_text()
        (project / "app/routes/items.py").write_text(
            ROUTER.replace("import APIRouter", "import APIRouter, Request") + SETTING_ROUTE
            + (LIFESPAN_ROUTE if lifespan else ""))
        register_in_custom(project, setting=True)
        (project / "tests").mkdir(exist_ok=True)
        (project / "tests/test_items.py").write_text(USER_TEST)
        return {"app/routes/items.py", "app/middleware/user_header.py", "app/custom.py",
                "tests/test_items.py"}
    # Before the extension points: registered in the template's own modules.
    (project / "app/api/items.py").write_text(ROUTER)
    main = project / "app/main.py"
    text = main.read_text()
    imports = next(line for line in text.splitlines() if line.startswith("from app.api import"))
    main.write_text(text.replace(imports, imports + ", items").replace(
        "    app.mount(", "    app.include_router(items.router)\n    app.mount("))
    package = project / "app/middleware/__init__.py"
    package.write_text(package.read_text().replace(
        "MIDDLEWARE = (", "MIDDLEWARE = (UserHeaderMiddleware, ").replace(
        "from app.middleware.security_headers import SecurityHeadersMiddleware\n",
        "from app.middleware.security_headers import SecurityHeadersMiddleware\n"
        "from app.middleware.user_header import UserHeaderMiddleware\n"))
    return {"app/api/items.py", "app/middleware/user_header.py", "app/main.py",
            "app/middleware/__init__.py"}



@pytest.fixture(scope="session")
def served_trees(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this run's tests mark the updated trees they serve: under pytest-xdist the
    directory its workers' own sit in, so each tree is served by one of them."""
    base = tmp_path_factory.getbasetemp()
    trees = (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "served-trees"
    trees.mkdir(exist_ok=True)
    return trees


@pytest.mark.parametrize(("answer_set", "source"), CASES)
def test_update_keeps_user_work_and_serves_the_changed_answer(
    copie, render_once, served_trees: Path, answer_set: str, source: str
) -> None:
    given, change = ANSWER_SETS[answer_set]
    answers = {**COPIER_DEFAULTS, **given}
    old = copie.copy(extra_answers=given, vcs_ref=source)
    assert old.exit_code == 0, old.exception
    project = old.project_dir
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", f"Rendered from {source}")

    # The user's work: a router, a middleware, a setting, a dependency, a README section
    # and local settings in the git-ignored .env (one under a name later renamed).
    user_files = add_router_and_middleware(project)
    interpreter = require_interpreter(answers["python_version"])
    subprocess.run(interpreter.command([UV, "add", "--frozen", "--python",
                                        interpreter.executable, USER_DEPENDENCY], project),
                   cwd=project, check=True, capture_output=True, env=UV_ENV)
    readme = project / "README.md"
    readme.write_text(readme.read_text() + USER_SECTION)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Our work")
    env = project / ".env"
    old_name, new_name, renamed_in = RENAMED
    # An APP_ setting only where the project has AppSettings to declare it (0.4.0 on):
    # an undeclared one is refused.
    user_setting = USER_SETTING if "app/custom.py" in user_files else ""
    user_proxy = f"{old_name if release_version(source) < renamed_in else new_name}=10.0.0.0/8"
    env.write_text("\n".join(
        line for line in env.read_text().splitlines() if not line.startswith("WEBSERVER_PORT=")
    ) + f"\nWEBSERVER_PORT=9100\n{user_proxy}\n{user_setting}\n")
    written_env = env.read_text()

    data = [arg for key, value in change.items() for arg in ("--data", f"{key}={value}")]
    update = subprocess.run(
        [COPIER, "update", "--trust", "--defaults", "--vcs-ref", "HEAD", *data],
        cwd=project, capture_output=True, text=True, timeout=120,
    )
    report = update.stdout + update.stderr
    got = files(project)
    marked = sorted(name for name, text in got.items()
                    if any(line.startswith(CONFLICT_MARKERS) for line in text.splitlines()))
    assert not any(name.endswith(".rej") for name in got), report
    assert marked == (KNOWN_CONFLICTS if release_version(source) < EXTENSION_POINTS else []), report
    if marked:
        # Never silent: reported by name, and the command fails.
        assert update.returncode != 0, report
        assert all(f"  {name}: conflict markers" in report for name in marked), report
        # Finished as the docs say: the template's side, the router moved to app/routes/.
        git(project, "checkout", "--theirs", "--", *marked)
        (project / "app/api/items.py").rename(project / "app/routes/items.py")
        register_in_custom(project, setting=False)
        user_files = (user_files - {"app/api/items.py", *marked}) | {
            "app/routes/items.py", "app/custom.py"}
        got = files(project)
    else:
        assert update.returncode == 0, report
        assert "commit everything, uv.lock" in report, report  # _message_after_update

    # The description is an answer: the project keeps the one it was made with, also
    # where the question's default has changed since.
    description = yaml.safe_load(got[".copier-answers.yml"]).get(
        "description", COPIER_DEFAULTS["description"])
    fresh = render_once({**given, **change, "description": description})
    answers = {**answers, "description": description}
    want = files(fresh)
    user_owned = {"README.md", ".env", "pyproject.toml", ".copier-answers.yml", *user_files}
    for name in set(want) - user_owned:
        assert got.get(name) == want[name], f"{name} differs from a fresh render"
    assert got["README.md"] == want["README.md"] + USER_SECTION
    pyproject = want["pyproject.toml"].replace(
        '    "pydantic-settings>=2.6",\n',
        f'    "pydantic-settings>=2.6",\n    "{USER_DEPENDENCY}",\n')
    assert got["pyproject.toml"] == pyproject
    # .env: the user's values only (the answers are defaults), under the template's header
    # where the migration wrote it anew, else as the user left it.
    if release_version(source) < ENV_REWRITTEN_BEFORE:
        assert got[".env"] == (
            want[".env"] + f"WEBSERVER_PORT=9100\n{new_name}=10.0.0.0/8\n{user_setting}\n")
    else:
        assert got[".env"] == written_env
    recorded = yaml.safe_load(got[".copier-answers.yml"])
    assert {key: recorded.get(key) for key in answers} == {**answers, **change}

    # What runs: the changed answer, the user's router, middleware and setting. Updates
    # from different releases often end in the same files (.copier-answers.yml aside):
    # each such tree is booted once per run, as its result cannot differ.
    served = {**answers, **change}
    tree = hashlib.sha256(repr((served["python_version"], sorted(
        (name, text) for name, text in got.items() if name != ".copier-answers.yml"
    ))).encode()).hexdigest()
    try:
        (served_trees / tree).touch(exist_ok=False)
    except FileExistsError:
        return  # another test of this run serves the same tree
    interpreter, python = environment_for(served["python_version"],
                                          fresh / "pyproject.toml")
    full = {"WEBSERVER_HEALTH_DETAIL": "full"}
    runner = interpreter.command([str(python)], project, env=full)
    with server_process.running_server(python=runner, cwd=project, env=full) as server:
        detail = httpx.get(f"{server.url}/health/detailed").json()
        ping = httpx.get(f"{server.url}/items/ping")
        greeting = httpx.get(f"{server.url}/items/greeting")
        opened = httpx.get(f"{server.url}/items/opened")
    assert (detail["engine"], detail["loop"]) == (
        served["default_engine"],
        served_loop(served["loop_policy"], served["default_engine"], served["python_version"]))
    assert ping.json() == {"pong": "kept"} and ping.headers.get("x-user") == "kept"
    if user_setting:
        assert greeting.json() == {"greeting": "hi"}
    if "pool" in got["app/routes/items.py"]:
        assert opened.json() == {"pool": "opened"}
    # The user's own test, as `make test` runs it.
    if "tests/test_items.py" in got:
        tested = subprocess.run(
            interpreter.command([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "tests/test_items.py"], project),
            cwd=project, capture_output=True, text=True, timeout=120)
        assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]


def test_an_update_that_stops_for_a_question_leaves_env_as_it_was(copie) -> None:
    """Without a terminal and without --defaults, Copier stops at its first question,
    after the migrations planned for before the update have run: .env must be as it
    was, and the same update with --defaults must still bring it over."""
    source = next(str(tag) for tag in RELEASES if release_version(tag) < EXTENSION_POINTS)
    old = copie.copy(extra_answers={}, vcs_ref=source)
    assert old.exit_code == 0, old.exception
    project = old.project_dir
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", f"Rendered from {source}")
    env = project / ".env"
    before = env.read_bytes()
    assert b"WEBSERVER_ENGINE=uvicorn" in before  # a value the 0.4.0 migration drops

    stopped = subprocess.run([COPIER, "update", "--trust", "--vcs-ref", "HEAD"], cwd=project,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=120)
    assert stopped.returncode != 0, stopped.stdout + stopped.stderr
    assert "Interactive session required" in stopped.stdout + stopped.stderr
    assert env.read_bytes() == before

    finished = subprocess.run([COPIER, "update", "--trust", "--defaults", "--vcs-ref", "HEAD"],
                              cwd=project, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
    report = finished.stdout + finished.stderr
    assert ".env: the values rendered from the Copier answers are dropped" in report, report
    assert b"WEBSERVER_ENGINE=" not in env.read_bytes()


def test_a_project_made_from_the_head_updates_to_the_next_release(tmp_path: Path) -> None:
    """`--vcs-ref HEAD` past the newest release records a development version
    (0.8.0.post1.dev0+g...); the next release must take it over like any other."""
    clone = tmp_path / "template"
    subprocess.run(["git", "clone", "-q", str(TEMPLATE_ROOT), str(clone)], check=True)
    git(clone, "commit", "-q", "--allow-empty", "-m", "Work after the newest release")
    project = tmp_path / "project"
    copy = subprocess.run([COPIER, "copy", "--trust", "--defaults", "--vcs-ref", "HEAD",
                           str(clone), str(project)], capture_output=True, text=True,
                          timeout=120)
    assert copy.returncode == 0, copy.stdout + copy.stderr
    made_from = yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"]
    assert "-g" in made_from, made_from  # not a release: the newest tag, then commits
    git(project, "add", "-A")
    git(project, "commit", "-qm", "New project from the head")
    git(clone, "commit", "-q", "--allow-empty", "-m", "Release 99.0.0")
    git(clone, "tag", "v99.0.0")
    update = subprocess.run([COPIER, "update", "--trust", "--defaults"], cwd=project,
                            capture_output=True, text=True, timeout=120)
    assert update.returncode == 0, update.stdout + update.stderr
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"] == "v99.0.0"
