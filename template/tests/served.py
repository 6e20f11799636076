"""What the project serves, by its answers (app/core/answers.py): the engines, and the
engine x loop pairs, its tests boot your app on. Neither `.env` nor the shell changes it
(tests/conftest.py); `copier update --data served_engines=[...]` does."""

from __future__ import annotations

from app.core import loops
from serving.settings import get_settings

_declared = get_settings()
ENGINES = tuple(engine for engine in loops.ENGINES
                if engine in loops.names(_declared.served_engines))
LOOPS = loops.names(_declared.served_loops)
PAIRS = loops.served_pairs(ENGINES, LOOPS, loops.python_version())
