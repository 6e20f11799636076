"""`python -m bench.ladder_serve serve ...`: the project's command line serving one rung
of `bench app --ladder` (bench/ladder.py) instead of the app, behind the same engine,
settings and per-worker wrappers. Importing this module replaces `create_served_app`
before any engine module imports it; imported, not only run, so that uvicorn's and
Hypercorn's spawned workers (which import the parent's main module) get it too. The
rung comes from the environment (RUNG_ENV), which every worker inherits.
"""

from __future__ import annotations

import json
import os
import runpy
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
    runpy.run_module("cli", run_name="__main__")  # the command line, run as `python -m cli`
