"""What the machine did during a slice, from /proc: the server's CPU time, and how each
core's time went (idle, stolen by the hypervisor, used by other processes).

A slice is set aside when the server's core was taken away from it (steal time, or
another process on the core) or the driver's cores were (another process used them
while less than a core stayed idle): measured on a 2-core VM, a server whose core is
shared serves up to 2x fewer requests for reasons that are not the engine's, and a
driver whose core is shared sends its requests in bursts, which changed the ratio
between the engines from 1.08 to 1.2.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
TAKEN = 0.10  # share of a core taken from the server (or its driver) that spoils a slice
# Idle time left on the driver's cores below which the driver waited for them: measured
# here, rounds whose driver core others used 13-35 % (half of it still idle) gave the
# ratios of quiet rounds; 70 % and more (under a fifth idle) moved them by up to 10 %.
DRIVER_IDLE = 0.25


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
    """User + system CPU seconds of a process and all its descendants (the workers)."""
    total = 0
    for member in [pid, *descendants(pid)]:
        if fields := _stat(member):
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children (the driver runs, once waited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class CoreTimes:
    """Seconds each kind of time added up to on a set of cores (from /proc/stat)."""

    total: float = 0.0
    idle: float = 0.0  # idle and iowait
    steal: float = 0.0  # the hypervisor ran something else on the virtual CPU

    def __sub__(self, other: CoreTimes) -> CoreTimes:
        return CoreTimes(self.total - other.total, self.idle - other.idle,
                         self.steal - other.steal)


def core_times(cores: set[int] | None) -> CoreTimes:
    """The counters of `cores` (None: every core) since boot."""
    total = idle = steal = 0
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return CoreTimes()
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        if cores is not None and int(name[3:]) not in cores:
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        values = [int(value) for value in fields[:8]]
        total += sum(values)
        idle += values[3] + values[4]
        steal += values[7]
    return CoreTimes(total / TICKS, idle / TICKS, steal / TICKS)


@dataclass(frozen=True)
class Shares:
    """How a set of cores spent a slice, as shares of one core's time (0-1 per core)."""

    cores: int
    idle: float
    steal: float
    ours: float  # our processes: the server (or the driver)
    others: float  # everything else that ran there

    def as_dict(self) -> dict[str, float | int]:
        return {"cores": self.cores, "idle": self.idle, "steal": self.steal,
                "ours": self.ours, "others": self.others}


def shares(delta: CoreTimes, cores: int, ours_cpu_s: float) -> Shares | None:
    if delta.total <= 0 or cores <= 0:
        return None
    wall = delta.total / cores  # seconds the slice lasted, by these cores' clocks
    busy = delta.total - delta.idle - delta.steal
    return Shares(cores, delta.idle / wall, delta.steal / wall, ours_cpu_s / wall,
                  max(0.0, busy - ours_cpu_s) / wall)


def taken_from_server(server: Shares | None) -> str | None:
    """Why the server's core was not its own during a slice, or None."""
    if server is None:
        return None
    per_core = (server.steal + server.others) / server.cores
    if per_core <= TAKEN:
        return None
    what = "steal" if server.steal >= server.others else "other processes"
    return f"server core {per_core:.0%} taken ({what})"


def taken_from_driver(driver: Shares | None) -> str | None:
    """Why the driver could not send as usual: other processes ran on its cores and
    left them less than a quarter of a core idle (a many-core machine has room to
    spare; a driver that fills its cores alone is reported as not saturating)."""
    if driver is None:
        return None
    taken = driver.steal + driver.others
    if taken <= TAKEN or driver.idle >= DRIVER_IDLE:
        return None
    return f"driver cores {taken:.0%} of a core taken"
