"""Boot each engine for real and ask it what is running."""

from __future__ import annotations

import httpx
import pytest

from app.core import loops
from app.core.config import get_settings
from tests.server_process import running_server

PYTHON = loops.python_version()


def loop_for(engine: str) -> str:
    """The project's loop policy where this engine accepts it here, else auto."""
    policy = get_settings().loop
    return policy if loops.refusal(engine, policy, PYTHON) is None else loops.AUTO


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_engine_serves_on_the_configured_loop(engine: str) -> None:
    loop = loop_for(engine)
    with running_server(["--engine", engine, "--loop", loop]) as (base_url, process):
        detail = httpx.get(f"{base_url}/health/detailed").json()
    expected = loops.resolve(engine, loop)
    assert detail["engine"] == engine
    assert detail["loop"] == expected
    assert detail["loop_class"].startswith(loops.LOOPS[expected].module + ".")
    assert detail["http"] == loops.resolve_http(engine)
    assert process.returncode in (0, -15)
