"""The rendered project's own Dockerfile, built with podman, run, probed and drained.

For the default answers and an answer set per other engine: the image builds, serves
the baked engine and loop, switches engine with `-e WEBSERVER_ENGINE`, runs as a non-root
uid, passes its HEALTHCHECK, holds no `.env`, refuses a privileged port with one
sentence, and `podman stop` under load loses nothing sent before it. Load goes to
127.0.0.1 only, bounded in connections and seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from extensions.matrix import loops, slugify
from tests import containers
from tests.conftest import (
    DEPLOY_ANSWER_SETS,
    drain,
    full_only,
    rendered,
    require_interpreter,
    served_loop,
    server_process,
)
from tests.project_envs import UV, UV_ENV

HADOLINT = str(Path(sys.executable).with_name("hadolint"))
GRACE = 5  # WEBSERVER_GRACEFUL_TIMEOUT given to the drained container
# defaults: locked, as after `make install` (the Dockerfile's UV_FROZEN path);
# granian-first: unlocked, two workers (granian spawns them on 3.14); gunicorn-first:
# two workers under its arbiter; python-3.12: no base image here, skipped with why;
# python-3.15: on a stand-in built from Debian experimental (tests/containers.py).
ANSWER_SETS = {**DEPLOY_ANSWER_SETS, "python-3.12": {"python_version": "3.12"},
               "python-3.15": {"python_version": "3.15"}}
LOCKED = {"defaults"}
# granian also runs in the defaults' image (switched to with -e WEBSERVER_ENGINE): its
# own image is built by `make test-all` only.
# `make test` builds the defaults' image; `make test-all` every set.
FULL_ONLY_SETS = {"granian-first", "gunicorn-first", "hypercorn-first", "python-3.15"}


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    joined = dockerfile.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines if line and not line.startswith("#")
    ]


def detail(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/health/detailed", timeout=5) as answer:
        return json.loads(answer.read())


def container_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """What the container printed, without podman's own log lines (time="..." ...)."""
    text = result.stdout + result.stderr
    return [line for line in text.splitlines() if line and not line.startswith("time=")]


@pytest.mark.parametrize("answer_set", [full_only(name, full=name in FULL_ONLY_SETS)
                                        for name in ANSWER_SETS])
def test_image_builds_serves_and_drains(copie, answer_set: str) -> None:
    answers, project = rendered(copie, ANSWER_SETS[answer_set])
    dockerfile = project / "Dockerfile"
    lint = subprocess.run([HADOLINT, "--no-color", str(dockerfile)],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    slug = slugify(answers["project_name"])
    steps = instructions(dockerfile)
    assert json.loads(dict(steps)["CMD"]) == [slug, "serve"]  # exec form: PID 1 is ours

    why_not = containers.missing(answers["python_version"])
    if why_not:
        if containers.REQUIRED and answers["python_version"] in containers.STAND_IN_BASES:
            pytest.fail(f"{why_not}; REQUIRE_CONTAINERS is set")
        pytest.skip(why_not)

    if answer_set in LOCKED:
        interpreter = require_interpreter(answers["python_version"])
        subprocess.run(interpreter.command([UV, "lock", "--quiet", "--python",
                                            interpreter.executable], project),
                       cwd=project, env=UV_ENV, check=True)
    image = f"localhost/cfe-test-{answer_set}:latest"
    seconds = containers.build(project, image)
    print(f"{answer_set}: built in {seconds:.1f} s")

    engine, port = answers["default_engine"], int(answers["port"])
    other = next(name for name in loops.ENGINES if name != engine)
    baked_loop = served_loop(answers["loop_policy"], engine, answers["python_version"])
    name = f"cfe-test-{answer_set}"

    with containers.running(image, name, port, server_process.free_port(),
                            env={"WEBSERVER_GRACEFUL_TIMEOUT": str(GRACE),
                                 "WEBSERVER_HEALTH_DETAIL": "full",
                                 "WEBSERVER_EXAMPLES": "true"}) as container:
        served = detail(container.url)
        assert (served["engine"], served["loop"]) == (engine, baked_loop)
        assert served["loop_class"].startswith(loops.LOOPS[baked_loop].module + ".")
        with pytest.raises(urllib.error.HTTPError) as no_docs:  # the image has no .env
            urllib.request.urlopen(f"{container.url}/docs", timeout=5)
        assert no_docs.value.code == 404
        assert served["python"].startswith(answers["python_version"] + ".")
        uid = container.exec("sh", "-c", "grep '^Uid:' /proc/1/status").stdout.split()
        assert uid[1] not in ("", "0"), uid  # PID 1, the launcher, is not root
        assert container.exec("sh", "-c", "test -z \"$(ls -A .)\"").returncode == 0, \
            "the working directory holds files (source or .env) in the image"
        assert container.exec("sh", "-c", "test ! -e /src").returncode == 0
        assert containers.podman("healthcheck", "run", name, check=False).returncode == 0

        stopping: list[subprocess.Popen[str]] = []

        def stop() -> None:
            stopping.append(subprocess.Popen(
                [containers.PODMAN or "podman", "stop", "--time", str(GRACE + 10), name],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True))

        def wait() -> int:
            while not stopping:  # called before the load starts, stop() during it
                time.sleep(0.01)
            stopping[0].wait(timeout=GRACE + 30)
            return container.inspect()["State"]["ExitCode"]

        report = drain.drive_and_stop(
            f"{container.url}/demo/sleep?ms=50", stop, wait, connections=32,
            signal_after=1.0, duration=2.0, grace=GRACE + 30)
        print(f"{answer_set}: podman stop under load: {report.summary()}")
        assert len(report.before) > 2 * 32, report.summary()  # the load really ran
        assert report.lost_before_signal == [], report.summary()
        assert report.cut_mid_response == [], report.summary()
        assert report.exited_after is not None and report.exited_after < GRACE, report.summary()
        assert report.exit_code == 0, report.summary()

    switched = {"WEBSERVER_ENGINE": other, "WEBSERVER_HEALTH_DETAIL": "full"}
    with containers.running(image, name, port, server_process.free_port(),
                            env=switched) as container:
        assert detail(container.url)["engine"] == other
        for example in ("/demo/items/1", "/demo/sleep?ms=1"):  # production serves no example
            with pytest.raises(urllib.error.HTTPError) as absent:
                urllib.request.urlopen(f"{container.url}{example}", timeout=5)
            assert absent.value.code == 404

    play_the_kubernetes_manifests(project, image, slug, port, engine, baked_loop,
                                  deployment_name=name)

    # The image runs as uid 10001, which may not listen below 1024.
    for each in loops.ENGINES:
        refused = containers.run_once(
            image, {"WEBSERVER_ENGINE": each, "WEBSERVER_LOOP": "auto", "WEBSERVER_PORT": "80"},
            extra=["--sysctl", "net.ipv4.ip_unprivileged_port_start=1024"])
        lines = container_lines(refused)
        assert refused.returncode == 2, lines
        assert len(lines) == 1 and lines[0].startswith(
            "Cannot start: port 80 is a privileged port"), lines


def play_the_kubernetes_manifests(project: Path, image: str, slug: str, port: int,
                                  engine: str, baked_loop: str, *, deployment_name: str
                                  ) -> None:
    """`podman kube play` the rendered Deployment and ConfigMap on the image just built,
    with the baked engine, as the manifests run it: non-root, read-only root
    filesystem, /tmp a volume.

    For this machine only: one replica (podman starts every replica on the same host
    port), the ports published on 127.0.0.1, the Deployment named for this test (answer
    sets share a project name, and their tests run at once), and the ConfigMap naming
    another loop than the image's, so serving it proves the pods read the ConfigMap.
    """
    loop = "asyncio" if baked_loop != "asyncio" else "uvloop"
    manifests = project / "deploy" / "kubernetes"
    played = project / "played"
    played.mkdir()
    host_port = server_process.free_port()
    deployment = yaml.safe_load((manifests / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = 1
    deployment["metadata"]["name"] = deployment_name
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["ports"][0].update(hostPort=host_port, hostIP="127.0.0.1")
    # podman publishes every containerPort, the metrics one on its own number otherwise
    container["ports"][1].update(hostPort=server_process.free_port(besides=host_port),
                                 hostIP="127.0.0.1")
    container["image"] = image  # the rendered one names a registry this machine lacks
    configmap = yaml.safe_load((manifests / "configmap.yaml").read_text())
    configmap["data"].update(WEBSERVER_ENGINE=engine, WEBSERVER_LOOP=loop,
                             WEBSERVER_ALLOWED_HOSTS="127.0.0.1",
                             WEBSERVER_GRACEFUL_TIMEOUT="2", WEBSERVER_HEALTH_DETAIL="full")
    (played / "deployment.yaml").write_text(yaml.safe_dump(deployment))
    (played / "configmap.yaml").write_text(yaml.safe_dump(configmap))
    deployment_file = str(played / "deployment.yaml")
    try:
        containers.podman("kube", "play", "--configmap", str(played / "configmap.yaml"),
                          deployment_file, timeout=120)
        url = f"http://127.0.0.1:{host_port}"
        pod_container = containers.Container(f"{deployment_name}-pod-0-{slug}", url)
        containers.wait_until_serving(pod_container, 30)
        with urllib.request.urlopen(f"{url}/livez", timeout=5) as answer:
            assert answer.read() == b"ok"
        served = detail(url)
        assert (served["engine"], served["loop"]) == (engine, loop)
        assert port == container["ports"][0]["containerPort"]
    finally:
        containers.podman("kube", "down", deployment_file, check=False)
