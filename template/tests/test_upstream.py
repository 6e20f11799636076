"""tests/upstream.py, without the network: which dependencies are bounded, and where a
bound moves to."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from tests import upstream

PYPROJECT = '''
[project]
dependencies = [
    "fastapi>=0.115.0",
    "uvicorn[standard]>=0.54.0,<0.55",
    "gunicorn[http2]>=27.0.1,<27.1",
    "uvloop>=0.21; sys_platform != 'win32'",
]
'''


def test_the_bounded_dependencies_are_those_with_an_upper_bound(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    found = upstream.bounded(tmp_path / "pyproject.toml")
    assert [str(requirement) for requirement in found] == [
        "uvicorn[standard]<0.55,>=0.54.0", "gunicorn[http2]<27.1,>=27.0.1"]
    assert [upstream.upper(requirement) for requirement in found] == [Version("0.55"),
                                                                      Version("27.1")]


def test_a_bound_moves_just_past_the_release_at_its_own_precision() -> None:
    cases = [("0.55", "0.55.0", "0.56"), ("0.55", "0.55.3", "0.56"), ("27.1", "28.0.1", "28.1"),
             ("2.9", "3.0", "3.1"), ("0.19", "1.0.0", "1.1")]
    for bound, release, moved in cases:
        assert upstream.next_bound(Version(bound), Version(release)) == Version(moved), bound


def test_a_release_within_the_bound_is_reported_without_running_anything() -> None:
    fine, line = upstream.report(Requirement("typer>=0.29.2,<0.30"), Version("0.29.5"))
    assert fine and line == "typer<0.30,>=0.29.2: 0.29.5 is the newest release, within the bound"
