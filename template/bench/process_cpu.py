"""CPU seconds (user + system) used by a process and all its descendants, from /proc."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after it are fixed.
    return text[text.rindex(")") + 2 :].split()


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        children = parents.get(queue.pop(), [])
        found += children
        queue += children
    return found


def tree_cpu_seconds(pid: int) -> float:
    total = 0
    for member in [pid, *descendants(pid)]:
        if fields := _stat(member):
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS
