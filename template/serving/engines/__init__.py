"""The engines, one module each: everything about an engine is in its module.

The contract an engine module meets (granian.py, and the packages uvicorn/ and
gunicorn/, each too long for one module, meet it; docs/adding-an-engine.md is the
guide):

- `NAME`: the engine's name, as `WEBSERVER_ENGINE` and `--engine` take it, and as its
  row in the matrix (app/core/loops.py) is keyed.
- Options, from the settings declaration (app/core/setting_specs.py): a function of
  `(settings, loop)` that returns the engine's own arguments by the engine's own names
  (`config`, `options`), every declared setting either passed or refused by the
  matrix's FEATURES for this engine. `loop` is resolved already (`settings.resolved_loop`);
  `loops.engine_value(NAME, loop)` is what the engine takes for it.
- `run(settings, loop)`: serves until SIGTERM or Ctrl-C, in the launcher's process
  (which has checked the address and exported the settings to the environment its
  workers inherit). It runs `settings.workers` workers, replaces a recycled one always
  and a failed one only with `settings.respawn_failed_workers`, and else stops and
  exits 1. A module-level function: a reloader pickles it.
- `RELOADS_ITSELF`: True when the engine's own reloader survives a syntax error saved
  into a running dev server; else the launcher restarts `run` on each change.
- The app: the engine imports `serving.served_app.APP_TARGET` (or a factory of its own
  that calls `create_served_app`, to add what each worker needs) with `factory=True`.
- Limits: WEBSERVER_MAX_HEADER_SIZE and WEBSERVER_HEADER_TIMEOUT as granian applies
  them (serving/head_limits.py), with the engine's own options or a subclass of its
  protocol, in this module.
- Drain: on SIGTERM, the connections already queued are accepted before the engine
  closes its listener (serving/drain.py), so they are served, not reset.
- Stop: each worker, however it stops (a signal, a reload, a recycle), sets
  `app.core.stopping.server_stopping` first, so its streams and WebSockets end
  (app/middleware/open_streams.py); its idle kept-alive connections are closed; nothing is
  logged at ERROR for a normal stop.
- Reload: on SIGHUP, `serving.reload.accepted` (the code on disk, built once), then
  every worker replaced, each new one serving before an old one stops, no request lost.
- The matrix row: `ENGINES`, `LOOPS`, `HTTP_PARSERS` and `FEATURES` in
  app/core/loops.py say which loops, parsers and settings it takes on which Python,
  and in what words a refusal names them. Plain data: Copier's extension reads it.
- Startup failures: the launcher's trial bind (`launcher.listen_address`) turns a bad
  address or port into one sentence for every engine; whatever else the engine
  refuses at startup, its module turns into one sentence naming the setting, and the
  process exits non-zero (uvicorn's STARTUP_FAILURE is 3; the others 1).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from app.core import layers

# What a dev server watches: the app package that is imported (not this file's
# neighbour: a copy of app/ run from elsewhere is the one to watch).
APP_DIR = Path(layers.__file__).resolve().parents[1]


def module(engine: str) -> ModuleType:
    """The engine's module, imported only when that engine serves (each imports its
    engine at its top)."""
    return importlib.import_module(f"{__name__}.{engine}")
