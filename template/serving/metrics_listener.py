"""The launcher's half of the metrics: a directory per run, named in the environment
the workers inherit, and (WEBSERVER_METRICS=port) the listener, a process of its own:
every engine forks its workers from the launcher or its child (a fork of a process
with threads can inherit a lock one of them held), so the launcher holds no thread.

The workers' half, what they count and how a scrape sums them, is app/core/metrics.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.core.metrics import MULTIPROC_ENV, RUN_LOCK, registry

RUN_PREFIX = "webserver-metrics-"


@contextlib.contextmanager
def for_run(mode: str, listening: socket.socket | None) -> Iterator[None]:
    """Around a run of the engine: the run's directory, named in the environment the
    workers inherit, and the listener on `listening` (WEBSERVER_METRICS=port); both gone
    after."""
    if mode == "off":
        yield
        return
    try:
        directory, lock = new_run_directory(RUN_PREFIX)
    except OSError as error:
        if listening is not None:
            listening.close()
        raise RunDirectoryError(
            f"the metrics directory cannot be made under {error.filename or 'it'}: "
            f"{error.strerror or error} ({MULTIPROC_ENV})") from None
    given = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = str(directory)
    listener = None
    launcher = os.getpid()
    try:
        if listening is not None:
            listener = start_listener(listening, directory)
        yield
    finally:
        # Only in the launcher: gunicorn forks its workers from this very call, and a
        # worker that exits unwinds the launcher's stack, this block included.
        if os.getpid() == launcher:
            _end_run(listener, directory, lock, given)


class RunDirectoryError(Exception):
    """The run's metrics directory could not be made, as one sentence."""


def _end_run(listener: subprocess.Popen[bytes] | None, directory: Path, lock: int,
             given: str | None) -> None:
    if listener is not None:
        listener.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            listener.wait(5)
    shutil.rmtree(directory, ignore_errors=True)
    os.close(lock)
    if given is None:
        os.environ.pop(MULTIPROC_ENV, None)
    else:
        os.environ[MULTIPROC_ENV] = given


def start_listener(listening: socket.socket, directory: Path) -> subprocess.Popen[bytes]:
    """A new interpreter that imports only this module, app/core/metrics.py and
    prometheus-client (~15 MB): nothing of the launcher inherited, no fork of a process
    with threads. It is handed the socket, listening already: a scrape while it starts
    waits instead of being refused; the launcher's copy is closed, so no worker forked
    later holds it."""
    package_root = str(Path(__file__).resolve().parents[1])  # where `serving` is importable
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    with listening:
        listening.listen()
        # Ctrl-C reaches it with the launcher's whole process group, maybe while it
        # still imports (a traceback): the launcher stops it (SIGTERM), or it sees the
        # launcher gone.
        code = (f"import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                f"from serving.metrics_listener import serve_socket; "
                f"serve_socket({listening.fileno()}, {str(directory)!r}, {os.getpid()})")
        return subprocess.Popen([sys.executable, "-c", code], pass_fds=[listening.fileno()],
                                env={**os.environ, "PYTHONPATH": path})


def new_run_directory(prefix: str) -> tuple[Path, int]:
    """A fresh directory for this run's files, under PROMETHEUS_MULTIPROC_DIR when you
    set one (a tmpfs, say), else the temporary directory; and the descriptor of the
    lock that marks it in use. Directories of runs that ended without removing theirs
    (a SIGKILL) are removed first: no process holds their lock."""
    base = Path(os.environ.get(MULTIPROC_ENV) or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    for stale in base.glob(f"{prefix}*"):
        with contextlib.suppress(OSError), _unless_locked(stale / RUN_LOCK) as free:
            if free:
                shutil.rmtree(stale, ignore_errors=True)
    # Made under a hidden name and renamed once locked: another launcher's sweep never
    # sees it unlocked.
    hidden = Path(tempfile.mkdtemp(prefix=f".{prefix}", dir=base))
    fd = os.open(hidden / RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    directory = hidden.with_name(hidden.name[1:])
    hidden.rename(directory)
    return directory, fd


@contextlib.contextmanager
def _unless_locked(lock: Path) -> Iterator[bool]:
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def serve_socket(fd: int, directory: str, parent: int) -> None:
    """The metrics listener, a process of its own (WEBSERVER_METRICS=port), answering on
    the listening socket `fd` the launcher `parent` handed over, for as long as it lives.
    Its own process, not a thread of the launcher: the engines fork their workers from
    the launcher's process, and a fork of a process with threads can inherit a lock
    held by one of them."""
    import signal
    import threading
    import time
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    from prometheus_client import make_wsgi_app

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # no line per scrape
            pass

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    os.environ[MULTIPROC_ENV] = directory
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    server = Server(("", 0), Quiet, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=fd)
    server.socket.set_inheritable(False)
    # What WSGIServer.server_bind sets after its own bind, which this socket has had.
    server.server_name, server.server_port = server.socket.getsockname()[:2]
    server.setup_environ()
    server.set_app(make_wsgi_app(registry()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while not stop and os.getppid() == parent:
        time.sleep(0.5)
