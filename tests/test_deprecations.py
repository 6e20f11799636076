"""A deprecation ends: each names the release that removes it (app/core/deprecations.py),
and this fails once that release is prepared (the CHANGELOG's newest section) or made
(its tag) with the old name still there."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import Version

from extensions.matrix import load_template_module
from tests.conftest import TEMPLATE_ROOT
from tests.releases import newest_release

DEPRECATED = load_template_module("app/core/deprecations.py").DEPRECATED
TEMPLATE = TEMPLATE_ROOT / "template"
# A call that warns of a deprecation, whatever its other arguments.
WARNS = re.compile(r"warn\((?:[^()]|\([^()]*\))*DeprecationWarning")


def import_path(path: Path) -> str:
    return ".".join(path.relative_to(TEMPLATE).with_suffix("").parts).removesuffix(".py")


def newest_section() -> Version:
    changelog = (TEMPLATE_ROOT / "CHANGELOG.md").read_text()
    return Version(re.search(r"^## (\d+\.\d+\.\d+)", changelog, re.M)[1])


def test_every_deprecated_name_goes_before_its_release() -> None:
    reached = max(newest_section(), Version(newest_release(TEMPLATE_ROOT).removeprefix("v")))
    due = {old: removed_in for old, (_, removed_in) in DEPRECATED.items()
           if Version(removed_in) <= reached}
    assert due == {}, f"release {reached} removes these, as promised: {due}"


def test_every_module_that_warns_is_listed() -> None:
    modules = [*TEMPLATE.rglob("*.py"), *TEMPLATE.rglob("*.py.jinja")]
    warning = {import_path(path) for path in modules if WARNS.search(path.read_text())}
    assert warning <= set(DEPRECATED), warning - set(DEPRECATED)
