"""The template's release tags (PEP 440, `vX.Y.Z`), re-created where a clone lost them.

A release is the commit `Release X.Y.Z` tagged `vX.Y.Z` (docs/releasing.md). Clones
made without tags still carry those commits, so the tags can be restored from them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from packaging.version import Version

RELEASE_SUBJECT = re.compile(r"Release (\d+\.\d+\.\d+)")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def ensure_tags(root: Path) -> None:
    existing = set(_git(root, "tag", "--list", "v*").split())
    for line in _git(root, "log", "--format=%H %s").splitlines():
        commit, _, subject = line.partition(" ")
        match = RELEASE_SUBJECT.fullmatch(subject)
        if match and f"v{match[1]}" not in existing:
            # Tolerate a tag made meanwhile by another process.
            subprocess.run(["git", "tag", f"v{match[1]}", commit], cwd=root,
                           capture_output=True)


def releases_before_head(root: Path) -> list[str]:
    """Tags reachable from HEAD that do not point at it, oldest first."""
    head = _git(root, "rev-parse", "HEAD").strip()
    tags = _git(root, "tag", "--merged", "HEAD", "--list", "v*").split()
    earlier = [t for t in tags if _git(root, "rev-list", "-n1", t).strip() != head]
    return sorted(earlier, key=lambda tag: Version(tag))


def newest_release(root: Path) -> str:
    """The tag `copier copy` takes without --vcs-ref: the newest by PEP 440."""
    tags = _git(root, "tag", "--list", "v*").split()
    return max(tags, key=lambda tag: Version(tag))
