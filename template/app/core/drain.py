"""Deprecated: moved to serving/drain.py; this name is removed in the next release.

Kept one release so that `from app.core.drain import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.drain` instead.
"""

import sys
import warnings

import serving.drain

warnings.warn("app.core.drain is deprecated (removed in the next release): "
              "import from serving.drain", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.drain  # the same module, under its old name
