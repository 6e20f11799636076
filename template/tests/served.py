"""What the project serves, by its answers (app/core/answers.py): the engine x loop pairs
its tests boot your app on, and the engines among them. Neither `.env` nor the shell
changes it (tests/conftest.py); `copier update --data served_engines=[...]` does."""

from __future__ import annotations

import pytest

from app.core import loops
from app.core.settings import DATABASE, served

_engines, LOOPS = served()
PAIRS = loops.served_pairs(_engines, LOOPS, loops.python_version())
ENGINES = tuple(dict.fromkeys(engine for engine, _ in PAIRS))  # those with a served loop
# /readyz from the servers the tests boot: with PostgreSQL, they have none to reach (a
# SQLite project's get a file of their own, tests/conftest.py).
READY = ((503, "database not answering") if DATABASE == "postgresql"
         else (200, "ok"))


def require(engine: str, loop: str | None = None) -> None:
    """Skip a test written for one engine (and loop) that this project does not serve."""
    if engine not in ENGINES or (loop is not None and (engine, loop) not in PAIRS):
        pytest.skip(f"this project does not serve {engine}"
                    + (f" on {loop}" if loop else "") + " (its answers served_engines, "
                    "served_loops)")
