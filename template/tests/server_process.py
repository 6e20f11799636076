"""Boot the real launcher on a free port, wait until it answers, stop it with SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

PROJECT_DIR = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BootError(AssertionError):
    pass


@contextlib.contextmanager
def running_server(
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    python: Sequence[str] = (sys.executable,),
    cwd: Path = PROJECT_DIR,
    timeout: float = 20.0,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`python -m app serve ARGS` on 127.0.0.1 and a free port; yields (base URL, process)."""
    port = free_port()
    command = [*python, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base_url, process, timeout)
        yield base_url, process
    finally:
        stop(process)


def wait_until_serving(base_url: str, process: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise BootError(f"server exited with {process.returncode}:\n{output}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base_url}/health/", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise BootError(f"server did not answer on {base_url} within {timeout} s")


def stop(process: subprocess.Popen[str], grace: float = 15.0) -> int:
    """SIGTERM and wait; a single uvicorn process re-raises the signal (exit -15)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise BootError(f"server ignored SIGTERM for {grace} s") from None
    return process.returncode
