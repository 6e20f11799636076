"""SIGHUP: replace every worker with the code on disk, and lose no request.

Each engine module replaces its workers in its own way (uvicorn: its supervisor, one
worker at a time once the new one answers its health check; granian: its own reload,
a new worker first; gunicorn: new workers added, the old ones stopped once the new
serve). What they share is here: before any worker is replaced, the code on disk is
built once in a separate process, as a worker would build it. A version that fails to
build is refused in one sentence and the old workers go on serving: granian and
gunicorn would otherwise stop the whole server when a new worker fails to start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

CHECK_TIMEOUT = 120  # seconds to build the app once: a slow import, not a hung one
# Seconds a new worker has to serve: uvicorn's own health check waits 5 s, which a new
# worker missed on a loaded 2-core machine (3 reloads in 4 kept the old code).
READY_TIMEOUT = 60.0
# The app as every worker builds it (serving/served_app.py), settings included.
BUILD = "from serving.served_app import create_served_app; create_served_app()"
REFUSED = ("Reload refused: the code on disk fails to load ({error}); the running "
           "workers go on serving.")
NOT_READY = ("Reload stopped: a new worker [{pid}] did not serve within {seconds:g} s; "
             "the running workers go on serving.")
STOPPED = "Reload stopped: the server is stopping."
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
DONE = "Reload done: {workers} worker(s) replaced with the code on disk."


def refusal() -> str | None:
    """Why the code on disk cannot replace the workers, as one sentence; else None."""
    try:
        built = subprocess.run([sys.executable, "-c", BUILD], capture_output=True,
                               text=True, timeout=CHECK_TIMEOUT, cwd=os.getcwd(),
                               check=False)
    except subprocess.TimeoutExpired:
        return REFUSED.format(error=f"building the app took over {CHECK_TIMEOUT} s")
    if built.returncode == 0:
        return None
    lines = [line.strip() for line in built.stderr.splitlines() if line.strip()]
    if not lines:
        return REFUSED.format(error=f"exit code {built.returncode}")
    # The traceback's last frame names the file and line that failed.
    where = next((match for line in reversed(lines)
                  if (match := FRAME.match(line))), None)
    at = ""
    if where is not None:
        path = Path(where["path"])
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
        at = f" at {path}:{where['line']}"
    return REFUSED.format(error=f"{lines[-1]}{at}")


def accepted(engine: str, log: Callable[[int, str], object]) -> bool:
    """Log the start of a reload (`log(level, line)`: the engine's logger), or the one
    sentence that refuses it."""
    log(logging.INFO, f"Received SIGHUP: checking the code on disk before replacing the "
                      f"{engine} workers.")
    if (sentence := refusal()) is not None:
        log(logging.ERROR, sentence)
        return False
    return True


def not_ready(pid: int | str | None, stopping: bool) -> tuple[int, str]:
    """The log level and line for a new worker that did not serve: the server's stop cut
    the wait short, or the worker took too long."""
    if stopping:
        return logging.INFO, STOPPED
    return logging.ERROR, NOT_READY.format(pid=pid, seconds=READY_TIMEOUT)


def listener_inodes(port: int) -> set[int]:
    """The inodes of the TCP sockets listening on `port` on this machine (/proc/net)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for fields in (line.split() for line in lines):
                if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[9]))
    return found


def server_pid(port: int) -> int | None:
    """The launcher serving on `port`: of the processes holding its listener (workers,
    uvicorn's supervisor, gunicorn's arbiter) and the parents that started them as
    workers (granian's main process: forked, the same command line; spawned, a
    multiprocessing child of the same program), the one whose parent is neither."""
    wanted = {f"socket:[{inode}]" for inode in listener_inodes(port)}
    holders = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted
                   for fd in os.listdir(f"/proc/{pid}/fd")):
                holders.add(int(pid))
    family = holders | {parent_of(pid) for pid in holders if started_as_worker(pid)}
    roots = {pid for pid in family if parent_of(pid) not in family}
    return roots.pop() if len(roots) == 1 else None


def started_as_worker(pid: int) -> bool:
    """Forked from its parent (the same command line) or spawned by it."""
    with contextlib.suppress(OSError):
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = Path(f"/proc/{parent_of(pid)}/cmdline").read_bytes()
        return command == parent or b"multiprocessing" in command
    return False


def parent_of(pid: int) -> int:
    with contextlib.suppress(OSError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return 0

