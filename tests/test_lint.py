"""The template's own code lints clean (the rendered projects are linted per combination)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import TEMPLATE_ROOT


def test_template_code_lints_clean() -> None:
    ruff = str(Path(sys.executable).with_name("ruff"))
    result = subprocess.run(
        [ruff, "check", "--no-cache", "extensions", "migrations", "tests", "docs"],
        cwd=TEMPLATE_ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout
