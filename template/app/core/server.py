"""Deprecated: the launcher moved to serving/launcher.py, the served app to
serving/served_app.py, each engine to serving/engines/; this name is removed in the
next release.

Kept one release so that `from app.core.server import ...` in your own code (and the
target `app.core.server:create_served_app`) goes on working (CHANGELOG.md, 0.10.0).
"""

import warnings

from serving.launcher import ListenError, listen_address, serve, startup_line
from serving.launcher import export_to_environment as publish
from serving.served_app import APP_TARGET, create_served_app

__all__ = ["APP_TARGET", "ListenError", "create_served_app", "listen_address", "publish",
           "serve", "startup_line"]
warnings.warn("app.core.server is deprecated: import from serving.launcher or "
              "serving.served_app (removed in the next release)", DeprecationWarning,
              stacklevel=2)
