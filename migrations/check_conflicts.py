"""Copier migration, after every update: fail loudly when the merge left conflicts.

Copier leaves `<<<<<<< before updating` markers (or `.rej` files) and still exits 0;
the next test run then fails on a syntax error far from the cause. This runs last,
after Copier has merged, lists every conflicted file with how to finish, and exits 1,
so `copier update` exits non-zero.

Usage: check_conflicts.py   (in the project, as Copier runs migrations)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MARKERS = (b"<<<<<<< before updating", b">>>>>>> after updating")


def git_lines(*args: str) -> list[str]:
    result = subprocess.run(["git", *args], capture_output=True, text=True)
    return result.stdout.splitlines() if result.returncode == 0 else []


def has_markers(path: Path) -> bool:
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return False
    return any(line.rstrip() in MARKERS for line in lines)


def conflicts() -> tuple[list[str], list[str]]:
    """(files with conflict markers, .rej files), as paths relative to the project."""
    candidates = set(git_lines("ls-files", "--cached", "--others", "--exclude-standard"))
    candidates |= {line.split("\t", 1)[1] for line in git_lines("ls-files", "--unmerged")}
    marked = sorted(name for name in candidates if has_markers(Path(name)))
    status = git_lines("status", "--porcelain", "--ignored", "--untracked-files=all")
    rejected = sorted(line[3:] for line in status if line[3:].endswith(".rej"))
    return marked, rejected


def main() -> int:
    marked, rejected = conflicts()
    if not marked and not rejected:
        return 0
    print("copier update could not merge the template's changes with yours:", file=sys.stderr)
    for name in marked:
        print(f"  {name}: conflict markers (<<<<<<< before updating ... "
              ">>>>>>> after updating)", file=sys.stderr)
    for name in rejected:
        print(f"  {name}: a change that could not be applied", file=sys.stderr)
    print(
        "To finish: in each file keep what you need from both sides and delete the "
        "markers; apply each .rej by hand and delete it; then `git add` the files, run "
        "`make test` and commit. `git diff` shows what the update changed.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
