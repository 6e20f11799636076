"""What every test of the project shares, the template's and yours.

TestClient names the host `testserver`, which WEBSERVER_ALLOWED_HOSTS refuses with 400
like any host it does not list. It is added here, before any test module is imported,
so `TestClient(create_app())` works as FastAPI's docs write it, also at module level.
The servers the tests boot inherit it; the allowed-hosts tests set their own value.
"""

from __future__ import annotations

import os

from app.core.setting_specs import BY_NAME

TEST_CLIENT_HOST = "testserver"

_allowed = BY_NAME["allowed_hosts"]
_hosts = os.environ.get(_allowed.env, str(_allowed.default))
if _hosts.strip() != "*" and TEST_CLIENT_HOST not in _hosts.split(","):
    os.environ[_allowed.env] = f"{_hosts},{TEST_CLIENT_HOST}"
