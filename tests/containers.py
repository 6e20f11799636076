"""podman, as the container tests drive it: build a rendered project's image, run it.

No Docker engine and no registry here: `shared/container/get-podman.sh` installs podman
and builds stand-in `python:3.X-slim` bases (3.11, 3.13, 3.14; Debian ships no 3.12).
Python 3.15 is only in Debian's experimental suite, which get-podman.sh does not
reach: its stand-in is built here, on the 3.14 one (`stand_in_from_experimental`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PODMAN = shutil.which("podman")
# CI sets this: a missing podman or base image then fails instead of skipping.
REQUIRED = os.environ.get("REQUIRE_CONTAINERS", "") not in ("", "0")
STAND_IN_BASES = ("3.11", "3.13", "3.14", "3.15")
# Bases built here: Python version -> the stand-in it is built on.
FROM_EXPERIMENTAL = {"3.15": "3.14"}
# The archive's Release files are older than this VM's date: apt would call them expired.
EXPERIMENTAL_BASE = """\
FROM {base}
RUN echo "deb http://deb.debian.org/debian experimental main" \\
      > /etc/apt/sources.list.d/experimental.list \\
 && printf 'Package: *\\nPin: release a=experimental\\nPin-Priority: 1\\n' \\
      > /etc/apt/preferences.d/experimental \\
 && apt-get -q -o Acquire::Check-Valid-Until=false update \\
 && apt-get install -y -q -t experimental python{version} python{version}-venv \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \\
 && ln -sf /usr/bin/python{version} /usr/local/bin/python \\
 && printf '#!/bin/sh\\nexec python{version} -m pip "$@"\\n' > /usr/local/bin/pip \\
 && python -c "import sys; assert sys.version.startswith('{version}.')" && pip --version
"""


def base_image(python_version: str) -> str:
    return f"docker.io/library/python:{python_version}-slim"


def missing(python_version: str) -> str | None:
    """Why an image for this Python cannot be built here, or None."""
    if PODMAN is None:
        return "podman is not installed (run shared/container/get-podman.sh)"
    if python_version not in STAND_IN_BASES:
        return (f"no python:{python_version}-slim base here: no registry is reachable and "
                f"get-podman.sh builds stand-ins for {', '.join(STAND_IN_BASES)} only "
                f"(Debian ships no Python {python_version} as its python3)")
    if python_version in FROM_EXPERIMENTAL:
        return stand_in_from_experimental(python_version)
    if podman("image", "exists", base_image(python_version), check=False).returncode:
        return (f"no {base_image(python_version)} image: run "
                f"shared/container/get-podman.sh {python_version}")
    return None


def stand_in_from_experimental(python_version: str) -> str | None:
    """Build python:X.Y-slim on an older stand-in, with Debian experimental's pythonX.Y
    as `python` and `pip` (as the official image has them); why not, or None."""
    image = base_image(python_version)
    if not podman("image", "exists", image, check=False).returncode:
        return None
    older = FROM_EXPERIMENTAL[python_version]
    if podman("image", "exists", base_image(older), check=False).returncode:
        return (f"no {image} image: it is built on {base_image(older)}, which is missing "
                f"(run shared/container/get-podman.sh {older})")
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "Containerfile").write_text(
            EXPERIMENTAL_BASE.format(base=base_image(older), version=python_version))
        built = podman("build", "--tag", image, context, check=False)
    if built.returncode:
        return (f"no {image} image: building it from Debian experimental failed:\n"
                f"{built.stderr[-1500:]}")
    return None


def podman(*args: str, check: bool = True, timeout: float = 600,
           ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([PODMAN or "podman", *args], capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result


def build(context: Path, tag: str) -> float:
    """Build the project's own Dockerfile; seconds taken. Docker format keeps HEALTHCHECK."""
    started = time.monotonic()
    podman("build", "--format", "docker", "--tag", tag, str(context))
    return time.monotonic() - started


@dataclass
class Container:
    name: str
    url: str

    def inspect(self) -> dict:
        return json.loads(podman("inspect", self.name).stdout)[0]

    def exec(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *argv, check=False)


@contextlib.contextmanager
def running(image: str, name: str, container_port: int, host_port: int,
            env: dict[str, str] | None = None, timeout: float = 30) -> Iterator[Container]:
    """`podman run -d` published on 127.0.0.1 only; removed on the way out."""
    flags = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
    podman("run", "-d", "--name", name, "-p", f"127.0.0.1:{host_port}:{container_port}",
           *flags, image)
    container = Container(name, f"http://127.0.0.1:{host_port}")
    try:
        wait_until_serving(container, timeout)
        yield container
    finally:
        podman("rm", "--force", "--time", "0", name, check=False)


def wait_until_serving(container: Container, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"{container.url}/health/", timeout=1) as answer:
            if answer.status == 200:
                return
        if not container.inspect()["State"]["Running"]:
            break
        time.sleep(0.2)
    logs = podman("logs", container.name, check=False)
    raise AssertionError(f"{container.name} did not serve within {timeout} s:\n"
                         f"{logs.stdout[-3000:]}{logs.stderr[-3000:]}")


def run_once(image: str, env: dict[str, str], extra: Sequence[str] = ()
             ) -> subprocess.CompletedProcess[str]:
    """`podman run --rm` to completion (a start that must fail)."""
    flags = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    return podman("run", "--rm", *extra, *flags, image, check=False, timeout=60)
