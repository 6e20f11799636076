"""Which upper bound of pyproject.toml can move. For each bounded dependency whose
newest release on PyPI is past its bound, the quick tests run with that release, in a
virtual environment of their own, and one line says whether the bound can move.

    python -m tests.upstream              # every bound
    python -m tests.upstream uvicorn      # one

Needs uv and PyPI. Exits 1 when a newer release fails the tests, 0 otherwise.
(.github/workflows/upstream.yml runs it weekly.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import urllib.request
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PROJECT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/pypi/{name}/json"


def bounded(pyproject: Path = PROJECT / "pyproject.toml") -> list[Requirement]:
    """The project's dependencies that have an upper bound (`<`)."""
    declared = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    requirements = [Requirement(line) for line in declared]
    return [requirement for requirement in requirements
            if any(spec.operator == "<" for spec in requirement.specifier)]


def upper(requirement: Requirement) -> Version:
    return next(Version(spec.version) for spec in requirement.specifier if spec.operator == "<")


def next_bound(bound: Version, release: Version) -> Version:
    """The bound that admits `release`, as fine as the old one: <0.55 and 0.55.2 give
    <0.56; <27.1 and 28.0.1 give <28.1."""
    places = len(bound.release)
    kept = list(release.release[:places]) + [0] * (places - len(release.release))
    kept[-1] += 1
    return Version(".".join(map(str, kept)))


def newest(name: str) -> Version | None:
    with urllib.request.urlopen(PYPI.format(name=name), timeout=30) as answer:
        releases = json.load(answer)["releases"]
    versions = [Version(text) for text, files in releases.items() if files]
    return max((version for version in versions if not version.is_prerelease), default=None)


def tried(requirement: Requirement, release: Version) -> subprocess.CompletedProcess[str]:
    """The quick tests with `release` in place of the bounded one, in a scratch venv."""
    uv = shutil.which("uv") or "uv"
    with tempfile.TemporaryDirectory() as scratch:
        override = Path(scratch) / "override.txt"
        # An override replaces the requirement whole: its extras are written again.
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        override.write_text(f"{requirement.name}{extras}=={release}\n")
        python = Path(scratch) / "venv" / "bin" / "python"
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable,
                        str(python.parent.parent)], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python),
                        "-r", "pyproject.toml", "--group", "pyproject.toml:dev",
                        "--override", str(override)], cwd=PROJECT, check=True)
        return subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                              cwd=PROJECT, capture_output=True, text=True)


def report(requirement: Requirement, release: Version | None) -> tuple[bool, str]:
    """(fine, one line) for one bound."""
    bound = upper(requirement)
    if release is None or release < bound:
        return True, f"{requirement}: {release} is the newest release, within the bound"
    run = tried(requirement, release)
    summary = (run.stdout.strip().splitlines() or ["no output"])[-1]
    if run.returncode == 0:
        return True, (f"{requirement}: {release} passes the quick tests ({summary}); the "
                      f"bound can move to <{next_bound(bound, release)}")
    return False, f"{requirement}: {release} fails the quick tests ({summary})"


def main(names: list[str]) -> int:
    fine = True
    for requirement in bounded():
        if names and requirement.name not in names:
            continue
        passed, line = report(requirement, newest(requirement.name))
        print(line, flush=True)
        fine = fine and passed
    return 0 if fine else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
