"""Deprecated: moved to serving/forwarded.py; this name is removed in the next release.

Kept one release so that `from app.core.forwarded import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.forwarded` instead.
"""

import sys
import warnings

import serving.forwarded

warnings.warn("app.core.forwarded is deprecated (removed in the next release): "
              "import from serving.forwarded", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.forwarded  # the same module, under its old name
