"""Deprecated: moved to serving/head_limits.py; this name is removed in the next release.

Kept one release so that `from app.core.head_limits import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.head_limits` instead.
"""

import sys
import warnings

import serving.head_limits

warnings.warn("app.core.head_limits is deprecated (removed in the next release): "
              "import from serving.head_limits", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.head_limits  # the same module, under its old name
