"""Deprecated: moved to serving/probes.py; this name is removed in the next release.

Kept one release so that `from app.core.probes import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.probes` instead.
"""

import sys
import warnings

import serving.probes

warnings.warn("app.core.probes is deprecated (removed in the next release): "
              "import from serving.probes", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.probes  # the same module, under its old name
