"""Whether the run's settings fit the memory of the container it runs in.

A worker holds at most WEBSERVER_BODY_BUDGET bytes of request bodies at once
(app/middleware/request_limits.py); `memory_limit_mib` (setting_specs.py) is what a
container of these workers needs, the formula the Kubernetes Deployment is sized by.
When the cgroup's limit is readable and smaller, `serve` says so before it starts:
past the limit the kernel kills the whole container, not one request."""

from __future__ import annotations

from pathlib import Path

from app.core.setting_specs import BY_NAME, memory_limit_mib
from app.core.settings import Settings

# cgroup v2, then v1; v1 writes a huge number for "no limit".
LIMIT_FILES = (Path("/sys/fs/cgroup/memory.max"),
               Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
NO_LIMIT_ABOVE = 1 << 60


def container_limit_mib(files: tuple[Path, ...] = LIMIT_FILES) -> int | None:
    """The memory limit of this process's cgroup in MiB, or None (none, or unreadable)."""
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if not text.isdigit() or int(text) >= NO_LIMIT_ABOVE:
            return None
        return int(text) >> 20
    return None


def memory_warning(settings: Settings, limit_mib: int | None) -> str | None:
    """One sentence when the settings cannot be held within `limit_mib`, else None."""
    if limit_mib is None:
        return None
    budget = BY_NAME["body_budget"].env
    if not settings.body_budget:
        return (f"warning: {budget} is 0, so nothing bounds the request bodies a worker "
                f"holds, and the container's memory limit is {limit_mib} MiB: set a "
                "budget (docs/deploy.md, \"Memory\").")
    needed = memory_limit_mib(settings.workers, settings.body_budget)
    if needed <= limit_mib:
        return None
    return (f"warning: {settings.workers} worker(s) with {budget}={settings.body_budget} "
            f"may need {needed} MiB, and the container's memory limit is {limit_mib} MiB: "
            f"lower {BY_NAME['workers'].env} or {budget}, or raise the limit "
            "(docs/deploy.md, \"Memory\").")
