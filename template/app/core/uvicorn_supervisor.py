"""Deprecated: moved to serving/engines/uvicorn.py; this name is removed in the next release.

Kept one release so that `from app.core.uvicorn_supervisor import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.engines.uvicorn` instead.
"""

import sys
import warnings

import serving.engines.uvicorn

warnings.warn("app.core.uvicorn_supervisor is deprecated (removed in the next release): "
              "import from serving.engines.uvicorn", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.engines.uvicorn  # the same module, under its old name
