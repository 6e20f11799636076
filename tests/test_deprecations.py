"""A deprecation ends: each names the release that removes it (app/core/deprecations.py),
and this fails once that release is made with the old name still there."""

from __future__ import annotations

import ast
from pathlib import Path

from packaging.version import Version

from extensions.matrix import load_template_module
from tests.conftest import TEMPLATE_ROOT
from tests.releases import newest_release

DEPRECATED = load_template_module("app/core/deprecations.py").DEPRECATED
TEMPLATE = TEMPLATE_ROOT / "template"


def warns_deprecation(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(node, ast.Name) and node.id == "DeprecationWarning"
               for node in ast.walk(tree))


def import_path(path: Path) -> str:
    return ".".join(path.relative_to(TEMPLATE).with_suffix("").parts)


def test_every_deprecated_name_goes_before_its_release() -> None:
    made = Version(newest_release(TEMPLATE_ROOT).removeprefix("v"))
    reached = {old: removed_in for old, (_, removed_in) in DEPRECATED.items()
               if Version(removed_in) <= made}
    assert reached == {}, f"release {made} is made: remove these, as promised: {reached}"


def test_every_module_that_warns_is_listed() -> None:
    warning = {import_path(path) for path in TEMPLATE.rglob("*.py") if warns_deprecation(path)}
    assert warning <= set(DEPRECATED), warning - set(DEPRECATED)
