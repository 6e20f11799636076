"""Deprecated: moved to serving/settings.py; this name is removed in the next release.

Kept one release so that `from app.core.config import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.settings` instead.
"""

import sys
import warnings

import serving.settings

warnings.warn("app.core.config is deprecated (removed in the next release): "
              "import from serving.settings", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.settings  # the same module, under its old name
