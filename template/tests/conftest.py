"""What every test of the project shares, the template's and yours: the `client`
fixture (TestClient on the app as you built it, your lifespan run around the test),
and the skip of the load tests that need the demo routes once you removed them.

TestClient names the host `testserver`, which WEBSERVER_ALLOWED_HOSTS refuses with 400
like any host it does not list. It is added here, before any test module is imported,
so `TestClient(create_app())` works as FastAPI's docs write it, also at module level.
The servers the tests boot inherit it; the allowed-hosts tests set their own value.

The tests read neither the WEBSERVER_* settings of your `.env` nor those of the shell
they run in: each starts from the project's declared settings (its answers and the
defaults), and a test about a setting sets it itself (your AppSettings read `.env` as
you declared them). So CORS origins in your `.env`, or a
`WEBSERVER_ENGINE` exported in your shell, change what `make serve` does, not what the
tests check.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

import pytest

from app.core.answers import ANSWERS
from app.core.framework import TestClient
from app.core.setting_specs import BY_NAME, ENV_PREFIX
from app.core.settings import ENV_FILE_VARIABLE, SETTINGS

TEST_CLIENT_HOST = "testserver"

# A suite started in the background (`make test &`, a CI runner) inherits SIGINT ignored,
# and so would every server it starts: a Ctrl-C test would then wait on a server that
# ignores it. The servers get SIGINT as a terminal gives it.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Before any test module imports the settings: the servers the tests boot inherit this.
for _name in [name for name in os.environ if name.upper().startswith(ENV_PREFIX)]:
    del os.environ[_name]
os.environ[ENV_FILE_VARIABLE] = ""  # no `.env`

_allowed = BY_NAME["allowed_hosts"]
os.environ[_allowed.env] = f"{_allowed.default},{TEST_CLIENT_HOST}"
# The streams, slow answers, bodies and WebSockets the promises are tested with.
os.environ[BY_NAME["examples"].env] = "true"
# With a database, the servers start without waiting for one (tests/test_database.py
# gives them one), on a database of their own: a SQLite file, or for PostgreSQL none.
if BY_NAME["database_startup_timeout"] in SETTINGS:
    os.environ[BY_NAME["database_startup_timeout"].env] = "0"
    if ANSWERS["database"] == "sqlite":
        _scratch = tempfile.mkdtemp(prefix="tests-db-")
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
        os.environ[BY_NAME["database_url"].env] = f"sqlite+aiosqlite:///{_scratch}/app.db"
    else:  # a port nothing listens on: not a PostgreSQL of yours
        from tests.server_process import free_port

        os.environ[BY_NAME["database_url"].env] = (
            f"postgresql+asyncpg://app@127.0.0.1:{free_port()}/app")


DEMO_ROUTES_GONE = ("the app no longer serves the template's demo routes (/demo/...), which "
                    "this load or signal test sends its requests to: restore app/api/demo.py "
                    "and its entry in app/api/examples.py to run it")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("demo_routes")]
    if marked and not demo_routes_served():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=DEMO_ROUTES_GONE))


def demo_routes_served() -> bool:
    from app.main import routers  # here: after the allowed hosts above are set

    return any(getattr(route, "path", "").startswith("/demo/")
               for router in routers() for route in router.routes)


@pytest.fixture
def client() -> Iterator[TestClient]:
    from app.main import create_app  # here: after the allowed hosts above are set

    with TestClient(create_app()) as test_client:
        yield test_client
