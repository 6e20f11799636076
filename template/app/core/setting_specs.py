"""Deprecated: moved to serving/setting_specs.py; this name is removed in the next release.

Kept one release so that `from app.core.setting_specs import ...` in your own code goes on
working (CHANGELOG.md, 0.10.0): import from `serving.setting_specs` instead.
"""

import sys
import warnings

import serving.setting_specs

warnings.warn("app.core.setting_specs is deprecated (removed in the next release): "
              "import from serving.setting_specs", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = serving.setting_specs  # the same module, under its old name
