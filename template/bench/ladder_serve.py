"""`python -m bench.ladder_serve serve ...`: the project's launcher, serving one rung of
`bench app --ladder` (bench/ladder.py) instead of the app.

The launcher has no option to serve another app, and should not grow one for a bench.
Every engine module gets its app from `serving.served_app.create_served_app` (the
contract in serving/engines/__init__.py), importing it when the module is imported:
this module replaces that function before any engine module is imported, and the rung
then runs behind the same engine, settings and per-worker wrappers as the app does.

The replacement happens when this module is imported, not only when it runs as the
main module: uvicorn's and Hypercorn's workers are spawned (uvicorn's supervisor runs
even one worker so), and a spawned process imports the parent's main module (as
`__mp_main__`) before it unpickles its target; made only under `__main__`, the
replacement reached neither (tests/test_bench_ladder.py went red on both). The rung
comes from the environment (RUNG_ENV), which every worker inherits.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bench.ladder import RUNG_ENV
from serving import served_app

as_served = served_app.create_served_app  # the real one: the ladder's top rung uses it


def create_rung_app(app: Any = None) -> Any:
    """Stands for create_served_app in a ladder process: the rung's app."""
    from bench.ladder import Case, rung_named

    spec = json.loads(os.environ[RUNG_ENV])
    return rung_named(Case.from_json(spec["case"]), spec["rung"], serve=as_served)


if os.environ.get(RUNG_ENV):
    served_app.create_served_app = create_rung_app  # type: ignore[assignment]

if __name__ == "__main__":
    from app.cli import cli

    cli()
