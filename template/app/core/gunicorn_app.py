"""Deprecated: moved to serving/engines/gunicorn.py; this name is removed in the next release.

Kept one release so that `from app.core.gunicorn_app import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.engines.gunicorn` instead.
"""

import sys
import warnings

import serving.engines.gunicorn

warnings.warn("app.core.gunicorn_app is deprecated (removed in the next release): "
              "import from serving.engines.gunicorn", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.engines.gunicorn  # the same module, under its old name
