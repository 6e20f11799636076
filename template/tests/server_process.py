"""Boot the real launcher on a free port, wait until it answers, stop it with SIGTERM."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

PROJECT_DIR = Path(__file__).resolve().parents[1]


# Ports for test servers come from below the kernel's ephemeral range, in turn, through a
# counter every test process on the machine shares: a port the kernel picked (bind to 0)
# could be picked again, by a parallel suite or as a client's local port, before the
# server bound it, and once was.
PORT_COUNTER = Path(tempfile.gettempdir()) / "server-process-ports"


FULL_DETAIL = {"WEBSERVER_HEALTH_DETAIL": "full"}  # /health/detailed names the worker

def server_ports() -> range:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(1024, low - 12000), low)


def free_port(besides: int = 0) -> int:
    ports = server_ports()
    try:
        counter = PORT_COUNTER.open("a+")
    except OSError:  # another user's counter: the kernel's pick, as before
        return kernel_port(besides)
    with counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        last = counter.read().strip()
        turn = int(last) if last.isdigit() else random.randrange(len(ports))
        for _ in range(len(ports)):
            turn = (turn + 1) % len(ports)
            if ports[turn] != besides and bindable(ports[turn]):
                break
        counter.seek(0)
        counter.truncate()
        counter.write(str(turn))
    return ports[turn]


def kernel_port(besides: int) -> int:
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port != besides:
            return port


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class BootError(AssertionError):
    pass


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path  # stdout and stderr, readable while the server runs
    metrics_url: str = ""  # the metrics listener (WEBSERVER_METRICS=port)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def running_server(
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    python: Sequence[str] = (sys.executable,),
    program: Sequence[str] | None = None,
    cwd: Path = PROJECT_DIR,
    timeout: float = 20.0,
    https_ca: str = "",
    new_session: bool = False,
) -> Iterator[Server]:
    """`python -m cli serve ARGS` (or `PROGRAM serve ARGS`) on 127.0.0.1 and a free port,
    its metrics listener on another (unless `env` names one); over HTTPS, trusting the
    certificate authority in the file `https_ca`, when given (the server's TLS settings
    are the caller's); in a process group of its own with `new_session`, as a terminal
    starts it (a signal to the group reaches every worker)."""
    port = free_port()
    env = {"WEBSERVER_METRICS_PORT": str(free_port(besides=port)), **(env or {})}
    program = program or [*python, "-m", "cli"]
    # The metrics port as a flag too: a program run inside a root (py314-run) gets only
    # the environment its runner hands over, and 9464 may be taken by a service here.
    command = [*program, "serve", "--host", "127.0.0.1", "--port", str(port),
               "--metrics-port", env["WEBSERVER_METRICS_PORT"], *args]
    with tempfile.TemporaryDirectory() as logs:
        log = Path(logs) / "server.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, cwd=cwd, env={**os.environ, **env},
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=new_session,
            )
        scheme = "https" if https_ca else "http"
        server = Server(f"{scheme}://127.0.0.1:{port}", process, log,
                        f"http://127.0.0.1:{env['WEBSERVER_METRICS_PORT']}/metrics")
        try:
            wait_until_serving(server, timeout, verify=trusting(https_ca) if https_ca else True)
            yield server
        finally:
            stop(server)


def trusting(ca_file: str) -> ssl.SSLContext:
    """A client's TLS context that trusts the certificate authority in `ca_file`."""
    return ssl.create_default_context(cafile=ca_file)


def wait_until_serving(server: Server, timeout: float,
                       verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + timeout
    # One client for every try: each new one loads the trusted certificates anew.
    with httpx.Client(timeout=1, verify=verify) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise BootError(
                    f"server exited with {server.process.returncode}:\n{server.output()}")
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{server.url}/health/").status_code == 200 and (
                        all_workers_started(server.output())):
                    return
            time.sleep(0.1)
    raise BootError(f"server did not answer on {server.url} within {timeout} s:\n{server.output()}")


def all_workers_started(log: str) -> bool:
    """granian and gunicorn answer once one worker is up; a SIGTERM that lands while
    another is still starting can leave granian 2.8 deaf to it, and gunicorn 27 waiting
    for that worker (seen on 3.14), so tests stop them only after all."""
    return (log.count("Started worker-") >= log.count("Spawning worker-")
            and log.count("ASGI server listening on") >= log.count("Booting worker with pid"))


def stop(server: Server, grace: float = 15.0) -> int:
    """SIGTERM and wait; a single uvicorn process re-raises the signal (exit -15)."""
    process = server.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired as expired:
            # Its workers too: one that outlives its supervisor keeps the port and the
            # CPU for the rest of the run.
            workers = descendants(process.pid)
            for pid in [process.pid, *workers]:  # its supervisor first: none replaced
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.wait()
            # Not `from None`: called while a test's own failure unwinds (a `with`
            # block's exit), that would hide the failure behind this one.
            raise BootError(
                f"server ignored SIGTERM for {grace} s:\n{server.output()[-3000:]}"
            ) from expired
    return process.returncode


def wait_until(condition: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    """Whether `condition()` came true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll)
    return False


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """Its children, theirs, and so on."""
    found = children(pid)
    return [*found, *(grandchild for child in found for grandchild in descendants(child))]


def answering_worker(server: Server) -> int:
    """The pid of the worker that answers one request (the server run with FULL_DETAIL)."""
    return int(httpx.get(f"{server.url}/health/detailed").json()["pid"])


def worker_pids(server: Server, tries: int = 40, workers: int = 1) -> set[int]:
    """The pids answering `tries` requests, and more until `workers` have answered (up
    to ten times as many: workers sharing one listener take turns unevenly)."""
    pids: set[int] = set()
    with connection_per_request() as client:
        for attempt in range(tries * 10):
            if attempt >= tries and len(pids) >= workers:
                break
            pids.add(client.get(f"{server.url}/health/detailed").json()["pid"])
    return pids


def connection_per_request(timeout: float = 5.0) -> httpx.Client:
    """A client that opens a connection for each request, so that requests spread over
    the workers. One for a series: each new client loads the trusted certificates anew."""
    return httpx.Client(headers={"Connection": "close"}, timeout=timeout)


def running(pid: int) -> bool:
    """Neither gone nor a zombie waiting for its parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
