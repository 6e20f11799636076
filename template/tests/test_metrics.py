"""Prometheus metrics: labelled by route template, and summed right over workers that
are recycled and killed, on every engine, as a real Prometheus counts them.

The Prometheus test needs Debian's `prometheus` (`apt-get install prometheus`): it
skips, with the reason, where it is missing, and fails instead when
REQUIRE_PROMETHEUS=1 (CI). The direct scrapes need nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from app.core import loops
from app.core.framework import APIRouter, TestClient
from app.core.metrics import MULTIPROC_ENV, UNMATCHED
from app.core.settings import Settings
from app.main import create_app
from serving import launcher, metrics_listener
from tests import served
from tests.server_process import (
    PROJECT_DIR,
    children,
    connection_per_request,
    free_port,
    running_server,
    wait_until,
)

ITEMS = "/demo/items/{item_id}"
COUNT = "http_server_request_duration_seconds_count"
FAMILIES = {  # every metric, with its labels: the same on every engine
    "http_server_request_duration_seconds": {"method", "route", "status_class"},
    "http_server_active_requests": set(),
    "webserver_info": {"engine", "loop", "parser", "python", "workers"},
}
# PROMETHEUS names the binary where it is not on PATH (the template's suite runs 3.14 in a
# Debian root that binds the host's).
PROMETHEUS = os.environ.get("PROMETHEUS") or shutil.which("prometheus")
REQUIRED = os.environ.get("REQUIRE_PROMETHEUS", "") not in ("", "0")


def in_process_count(route: str, method: str = "GET", status_class: str = "2xx") -> float:
    return REGISTRY.get_sample_value(COUNT, {"method": method, "route": route,
                                             "status_class": status_class}) or 0.0


def test_requests_are_labelled_by_route_template_method_and_status_class() -> None:
    # Routes of the test's own, as yours would be: the demo router may be gone.
    failing = APIRouter()

    @failing.get("/metrics-test/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"item_id": item_id}

    @failing.get("/metrics-test/fails/{n}")
    async def fails(n: int) -> None:
        raise RuntimeError("a bug")

    items = "/metrics-test/items/{item_id}"
    before = {key: in_process_count(*key) for key in [
        (items,), ("/health/", "POST", "4xx"), (UNMATCHED, "GET", "4xx"),
        (UNMATCHED, "other", "4xx"), ("/metrics-test/fails/{n}", "GET", "5xx")]}
    with TestClient(create_app(user_routers=[failing]), base_url="http://localhost",
                    raise_server_exceptions=False) as client:
        for number in range(3):
            assert client.get(f"/metrics-test/items/{number}").status_code == 200
        assert client.post("/health/").status_code == 405  # the route, a method it lacks
        assert client.get("/no/such/path").status_code == 404
        assert client.request("BREW", "/no/such/path").status_code == 404
        assert client.get("/metrics-test/fails/1").status_code == 500
    after = {key: in_process_count(*key) for key in before}
    assert {key: after[key] - before[key] for key in before} == {
        (items,): 3, ("/health/", "POST", "4xx"): 1, (UNMATCHED, "GET", "4xx"): 1,
        (UNMATCHED, "other", "4xx"): 1, ("/metrics-test/fails/{n}", "GET", "5xx"): 1}


def serve_refusal(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([sys.executable, "-m", "cli", "serve", "--host", "127.0.0.1", *args],
                            cwd=PROJECT_DIR, env={**os.environ, **(env or {})},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stderr
    return result.stderr


@pytest.mark.slow
def test_a_metrics_port_that_cannot_be_listened_on_is_one_sentence() -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        assert serve_refusal("--port", str(port), "--metrics-port", str(taken)) == (
            f"Cannot start: port {taken} on 127.0.0.1 is already in use by another process: "
            "stop that process or choose another port (--metrics-port, "
            "WEBSERVER_METRICS_PORT).\n")
    assert serve_refusal("--port", str(port), "--metrics-port", str(port)) == (
        f"Cannot start: WEBSERVER_METRICS_PORT={port} is also the app's port: give the "
        "metrics another port, or serve them at /metrics on the app's port with "
        "WEBSERVER_METRICS=path.\n")
    assert serve_refusal("--port", str(port), env={"OTEL_TRACES_EXPORTER": "zipkin"}) == (
        "Cannot start: OTEL_TRACES_EXPORTER names 'zipkin', an exporter this service does "
        "not have: choose otlp, console, none.\n")


def test_a_metrics_port_taken_after_the_trial_bind_is_one_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher listens on the metrics port itself: taken since `serve` tried it (a
    database wait lies between), it is the same sentence, and the run leaves nothing."""
    monkeypatch.setattr(os, "environ", {**os.environ, MULTIPROC_ENV: str(tmp_path)})
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        settings = Settings(host="127.0.0.1", port=free_port(), metrics_port=taken)
        with pytest.raises(launcher.ListenError) as refused:
            launcher.serve(settings)
    assert str(refused.value) == (
        f"port {taken} on 127.0.0.1 is already in use by another process: stop that "
        "process or choose another port (--metrics-port, WEBSERVER_METRICS_PORT).")
    assert list(tmp_path.iterdir()) == []  # the run's directory, removed
    assert os.environ[MULTIPROC_ENV] == str(tmp_path)


def test_a_metrics_directory_that_cannot_be_made_is_one_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PROMETHEUS_MULTIPROC_DIR names a file: `serve` says so, and not as a port taken."""
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    monkeypatch.setattr(os, "environ", {**os.environ, MULTIPROC_ENV: str(not_a_directory)})
    settings = Settings(host="127.0.0.1", port=free_port(), metrics_port=free_port())
    with pytest.raises(metrics_listener.RunDirectoryError) as refused:
        launcher.serve(settings)
    assert str(refused.value) == (
        f"the metrics directory cannot be made under {not_a_directory}: File exists "
        "(PROMETHEUS_MULTIPROC_DIR)")
    with socket.socket() as again:  # the launcher's bind let go (no SO_REUSEADDR here)
        again.bind(("127.0.0.1", settings.metrics_port))


SLOT_USER = """
import sys, time
from app.core.metrics import server_metrics, write_batches, _slot
metrics = server_metrics()
for _ in range(int(sys.argv[1])):
    metrics.durations.add(("GET", "/x", "2xx"), 0.001)  # as the metrics layer does
write_batches()  # as the metrics layer's timer does
metrics.in_flight.set(int(sys.argv[3]))
print(_slot["name"], flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.mark.slow
def test_a_slot_is_never_shared_and_its_successor_goes_on_counting(tmp_path: Path) -> None:
    """Two processes at once get two slots; one started after the first ended takes
    its slot and adds to its count; no file per process is left behind. A process
    killed with requests in flight leaves its counts, and its in-flight requests go."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    def start(observations: int, linger: float, in_flight: int = 0) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", SLOT_USER, str(observations),
                                 str(linger), str(in_flight)], cwd=PROJECT_DIR, env=env,
                                text=True, stdout=subprocess.PIPE)

    def scraped_now() -> str:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
        try:
            from app.core.metrics import registry

            return generate(registry())
        finally:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]

    first, second = start(3, 60, in_flight=2), start(4, 0)
    slots = {second.stdout.readline().strip(), first.stdout.readline().strip()}  # type: ignore[union-attr]
    second.wait(10)
    third = start(5, 0)  # the first still holds its slot: the third takes the second's
    assert third.stdout.readline().strip() in slots  # type: ignore[union-attr]
    third.wait(10)
    assert slots == {"w0", "w1"}
    assert scraped(scraped_now(), "http_server_active_requests") == [({}, 2.0)]
    first.kill()  # SIGKILL, with its two requests in flight
    first.wait(10)
    text = scraped_now()
    assert scraped_count(text, "/x") == 3 + 4 + 5
    assert scraped(text, "http_server_active_requests") in ([], [({}, 0.0)])
    assert slots_with_files(tmp_path) == ["w0", "w1"]


BATCHES = """
import os, sys
from prometheus_client import Histogram, generate_latest
from app.core.metrics import registry, server_metrics, write_batches
from tests.test_metrics import scraped, scraped_count
durations = server_metrics().durations
yours = Histogram("yours_seconds", "a histogram of yours", ["kind"]).labels("x")


def counts():
    text = generate_latest(registry()).decode()
    return (float(scraped_count(text, "/x")),
            float(sum(value for _, value in scraped(text, "yours_seconds_count"))))


for _ in range(3):
    durations.add(("GET", "/x", "2xx"), 0.001)  # the request durations' own table
    yours.observe(0.001)  # prometheus-client's histogram, its writes batched
seen = [counts()]
write_batches()
durations.add(("GET", "/x", "2xx"), 0.002)
yours.observe(0.002)
seen.append(counts())
write_batches()
write_batches()  # nothing new: nothing written twice
seen.append(counts())
print(seen)
"""


@pytest.mark.slow
def test_observations_reach_the_files_in_batches(tmp_path: Path) -> None:
    """A worker's observations are in its files once written, each once: what a
    `kill -9` can take is what was observed since the last write (docs/observability.md)."""
    result = subprocess.run([sys.executable, "-c", BATCHES], cwd=PROJECT_DIR, text=True,
                            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
                            capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[(0.0, 0.0), (3.0, 3.0), (4.0, 4.0)]"


def test_a_table_cut_in_its_write_is_never_read(tmp_path: Path) -> None:
    """A worker writes its table in place, over the older of its two files: a scrape
    while it writes (or after a kill -9 in the write) reads the table before, and the
    slot's successor goes on from that one."""
    from app.core.request_durations import FILE, SIDES, RequestDurations

    worker = RequestDurations()
    for _ in range(2):  # the first table into one file, the second into the other
        worker.add(("GET", "/x", "2xx"), 0.001)
        worker.write(tmp_path, "w0")
    assert durations_counted(tmp_path) == 2
    # The third table, as it would be written over the first file...
    whole = tmp_path / "whole"
    whole.mkdir()
    worker.add(("GET", "/x", "2xx"), 0.001)
    worker.write(whole, "w0")
    third = next(path for path in whole.iterdir())
    assert third.name in {FILE.format(slot="w0", side=side) for side in SIDES}
    new, older = third.read_bytes(), tmp_path / third.name
    before = older.read_bytes()
    # ...cut after its first 8 bytes (its sequence number, not yet its length) and
    # halfway through.
    for cut in (8, len(new) // 2):
        older.write_bytes(new[:cut] + before[cut:])
        assert durations_counted(tmp_path) == 2, cut
    successor = RequestDurations()
    successor.load(tmp_path, "w0")
    successor.add(("GET", "/x", "2xx"), 0.001)
    successor.write(tmp_path, "w0")
    assert durations_counted(tmp_path) == 3


def durations_counted(directory: Path) -> float:
    from app.core.request_durations import InFiles

    return sum(sample.value for family in InFiles(directory).collect()
               for sample in family.samples if sample.name == COUNT)


FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from app.core.request_durations import RequestDurations
from tests.test_metrics import durations_counted
directory = Path(sys.argv[1])
worker = RequestDurations()
for _ in range(2):
    worker.add(("GET", "/x", "2xx"), 0.001)
    worker.write(directory, "w0")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: a short count
resource.setrlimit(resource.RLIMIT_FSIZE, (600, resource.RLIM_INFINITY))  # a full disk
for number in range(20):  # a table that no longer fits
    worker.add(("GET", f"/route{number}", "2xx"), 0.001)
seen = []
for _ in range(2):
    try:
        worker.write(directory, "w0")
        seen.append("written")
    except OSError:
        seen.append("refused")
    seen.append(durations_counted(directory))
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
worker.write(directory, "w0")  # room again
seen.append(durations_counted(directory))
print(seen)
"""


def test_a_write_the_disk_cuts_short_keeps_the_last_whole_table(tmp_path: Path) -> None:
    """A full disk writes part of a table: the write says so (the metrics layer logs it
    and tries again), the last whole table is what a scrape reads, and once there is
    room the next write has every request."""
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path)],
                            cwd=PROJECT_DIR, text=True, capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['refused', 2.0, 'refused', 2.0, 22.0]"


def test_a_duration_is_counted_in_its_bucket_and_every_one_above() -> None:
    """The durations' own table (app/core/request_durations.py) shows as
    prometheus-client's histogram did: `le` inclusive, buckets cumulative, the sum."""
    from prometheus_client import CollectorRegistry

    from app.core.request_durations import InMemory, RequestDurations

    table = RequestDurations()
    for seconds in (0.005, 0.3, 11.0):  # on a bound; between two; above the last
        table.add(("GET", "/x", "2xx"), seconds)
    table.add(("POST", "/y", "5xx"), 0.02)
    registry = CollectorRegistry()
    registry.register(InMemory(table))  # type: ignore[arg-type]
    text = generate(registry)
    buckets = {(labels["route"], labels["le"]): value for labels, value
               in scraped(text, "http_server_request_duration_seconds_bucket")}
    assert [buckets["/x", le] for le in ("0.005", "0.01", "0.25", "0.5", "10.0", "+Inf")] == [
        1, 1, 1, 2, 2, 3]
    assert [buckets["/y", le] for le in ("0.01", "0.025", "+Inf")] == [0, 1, 1]
    assert scraped(text, COUNT) == [
        ({"method": "GET", "route": "/x", "status_class": "2xx"}, 3.0),
        ({"method": "POST", "route": "/y", "status_class": "5xx"}, 1.0)]
    ((_, total),) = [(labels, value) for labels, value
                     in scraped(text, "http_server_request_duration_seconds_sum")
                     if labels["route"] == "/x"]
    assert total == pytest.approx(11.305)


def generate(registry: object) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry).decode()  # type: ignore[arg-type]


def scraped_count(text: str, route: str) -> float:
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == COUNT and sample.labels.get("route") == route)


def scraped(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [(sample.labels, sample.value) for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name]


def families(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(family.name, set()).update(set(sample.labels) - {"le"})
    return found


# --- Real servers: every engine, two workers.


def recycling(engine: str) -> list[str]:
    """Arguments that recycle a worker every few seconds on this engine."""
    if engine in loops.FEATURES["worker_max_requests"].honoured_by:
        return ["--worker-max-requests", "20"]
    return ["--worker-max-memory", "1"]  # every memory sample (5 s) under granian


def held_locks(pid: int) -> list[str]:
    held = []
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return [path for path in held if path.endswith(".lock")]


def workers(launcher: int) -> dict[int, str]:
    """The launcher's workers, found as what they are: processes holding a slot."""
    return {pid: lock for pid in children(launcher) for lock in held_locks(pid)
            if Path(lock).name.startswith("slot-")}


def run_directory(launcher: int) -> Path:
    (lock,) = [lock for lock in held_locks(launcher) if lock.endswith("/run.lock")]
    return Path(lock).parent


@contextlib.contextmanager
def running_prometheus(target: str) -> Iterator[str]:
    """Prometheus scraping `target` (host:port) every second; its URL."""
    if PROMETHEUS is None:
        reason = "prometheus is not installed (apt-get install prometheus)"
        if REQUIRED:
            pytest.fail(f"{reason}; REQUIRE_PROMETHEUS is set")
        pytest.skip(reason)
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        config = Path(home) / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: app\n    static_configs: [{{targets: ['{target}']}}]\n")
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={home}/data",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                        break
                assert process.poll() is None, process.stderr.read().decode()  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "prometheus did not get ready in 30 s"
                time.sleep(0.2)
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def promql(url: str, query: str) -> float | None:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5).json()
    assert answer["status"] == "success", answer
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def settled(read: object, expected: float, seconds: float = 15.0,
            stays: float = 0.0) -> float | None:
    """What `read()` gives once it equals `expected` (or after `seconds`); with
    `stays`, read again that much later: it must not have moved on."""
    deadline, value = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        value = read()  # type: ignore[operator]
        if value == expected:
            if stays:
                time.sleep(stays)
                return read()  # type: ignore[operator]
            return value
        time.sleep(0.2)
    return value


def get_items(url: str, count: int) -> int:
    """`count` requests for ITEMS, a connection each (so they spread over the workers);
    how many the client saw answered 200. The client waits as long as a real one: a
    request queued while no worker is up (uvicorn's recycled workers restart slowly on
    3.14) is answered later, and one the client gave up on would be counted after the
    test had read the counts."""
    answered = 0
    with connection_per_request(timeout=10) as client:
        for item in range(count):
            with contextlib.suppress(httpx.TransportError):
                answered += client.get(f"{url}/demo/items/{item}").status_code == 200
    return answered


def ledger(server: object, answered: int) -> int:
    """The ITEMS requests the app answered, from its JSON access log: one that lands on
    a worker as it is recycled can be answered by the app and still never reach the
    client (docs/observability.md), so the client's count can be lower by those. A
    worker writes a request's line just after its response: wait for the lines of the
    `answered` ones."""
    deadline = time.monotonic() + 5
    while True:
        count = 0
        for line in server.output().splitlines():  # type: ignore[attr-defined]
            if line.startswith("{") and '"path":"/demo/items/' in line:
                count += json.loads(line)["status"] == 200
        if count >= answered or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def sleep_request(url: str) -> None:
    """A request that is still being answered 4 s later (its worker is killed)."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(f"{url}/demo/sleep?ms=4000", timeout=10)


def scrape(server: object) -> str:
    try:
        return httpx.get(server.metrics_url, timeout=5).text  # type: ignore[attr-defined]
    except httpx.TransportError as error:
        # Seen once in a full run (granian, killed workers): say which of the launcher's
        # processes were alive, and what they printed (a listener's traceback).
        alive = {}
        for pid in children(server.process.pid):  # type: ignore[attr-defined]
            with contextlib.suppress(OSError):  # gone since: left out
                alive[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120]
        raise AssertionError(
            f"no scrape from {server.metrics_url}: {error!r}; the launcher's processes: "  # type: ignore[attr-defined]
            f"{alive}\n{server.output()[-2500:]}") from error  # type: ignore[attr-defined]


def in_flight(server: object) -> float:
    return sum(value for _, value in scraped(scrape(server), "http_server_active_requests"))


def counted_by_prometheus(prometheus: str, count: int) -> None:
    """Prometheus, scraping every second, finds the same number, and saw no counter
    reset (what a worker's counts vanishing would look like to it)."""
    query = f'sum({COUNT}{{route="{ITEMS}"}})'
    assert settled(lambda: promql(prometheus, query), count, stays=2.5) == count  # 2 scrapes
    assert promql(prometheus, f'sum(resets({COUNT}{{route="{ITEMS}"}}[5m]))') == 0


def slots_with_files(directory: Path) -> list[str]:
    """The slots whose durations are in `directory` (two files each: `durations-w0.a`,
    `durations-w0.b`)."""
    return sorted({path.name.removeprefix("durations-").split(".")[0]
                   for path in directory.glob("durations-*")})


def metric_files(launcher: int) -> list[str]:
    return slots_with_files(run_directory(launcher))


@pytest.mark.demo_routes
@pytest.mark.slow
@pytest.mark.parametrize("engine", served.ENGINES)
def test_the_listener_is_a_process_of_its_own(engine: str) -> None:
    """WEBSERVER_METRICS=port: the listener is a process of its own, not a thread of
    the launcher, which every engine forks its workers from (docs/observability.md)."""
    with running_server(["--engine", engine]) as server:
        assert get_items(server.url, 3) == 3
        count = settled(lambda: scraped_count(scrape(server), ITEMS), 3)
        assert count == 3
        listeners = [pid for pid in children(server.process.pid)
                     if b"serving.metrics_listener" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(listeners) == 1, listeners


HELD_AT_START = """
import os, time
deadline = time.monotonic() + 30
while not os.path.exists({go!r}) and time.monotonic() < deadline:
    time.sleep(0.01)
"""


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_metrics_port_listens_before_the_listener_has_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher listens on the metrics port before the engine starts: a scrape that
    comes while the listener still starts (granian's forked workers can answer first)
    waits for it, and is not refused. The launcher keeps no copy of the socket, which
    every worker it forks would inherit: with the listener gone, the port refuses."""
    go = tmp_path / "go"
    (tmp_path / "sitecustomize.py").write_text(HELD_AT_START.format(go=str(go)))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the listener starts held until `go`
    port = free_port()
    listening = launcher.bound_socket("127.0.0.1", port, launcher.METRICS_PORT_FROM)
    with metrics_listener.for_run("port", listening), \
            socket.create_connection(("127.0.0.1", port), timeout=10) as early:
        early.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        go.touch()
        assert early.makefile("rb").readline().startswith(b"HTTP/1.0 200"), "no scrape"
        (listener,) = [pid for pid in children(os.getpid())
                       if b"serving.metrics_listener" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        os.kill(listener, signal.SIGKILL)
        assert wait_until(lambda: refused(port), 5), "the port is still held without its listener"


@pytest.mark.demo_routes
@pytest.mark.slow
@pytest.mark.parametrize("engine", served.ENGINES)
def test_prometheus_counts_every_request_across_recycled_workers(engine: str) -> None:
    """Two workers, recycled every few seconds: a scrape, and a PromQL query through a
    real Prometheus, count exactly the requests the app answered; none vanished with
    a worker, none counted twice, and the files do not grow with the recycles."""
    args = ["--engine", engine, "--workers", "2", "--respawn-failed-workers", *recycling(engine)]
    with running_server(args, env={"WEBSERVER_ACCESS_LOG": "json"}) as server, \
            running_prometheus(server.metrics_url.split("/")[2]) as prometheus:
        launcher = server.process.pid
        first = set(workers(launcher))
        sent, answered, deadline = 0, 0, time.monotonic() + 30
        # Until none of the first workers is left (granian: ~10 s). Where the workers
        # recycle on a timer, a pause between batches spares the cores meanwhile.
        by_time = "--worker-max-memory" in args
        while first & set(workers(launcher)) or sent < 60:
            answered += get_items(server.url, 20)
            sent += 20
            time.sleep(0.5 if by_time else 0)
            assert time.monotonic() < deadline, f"no worker recycled in 30 s: {workers(launcher)}"
        logged = ledger(server, answered)
        count = settled(lambda: scraped_count(scrape(server), ITEMS), logged)
        assert count == logged and answered <= count <= sent, (count, answered, sent)
        counted_by_prometheus(prometheus, count)
        files = metric_files(launcher)
        assert len(files) <= 3, files  # as many slots as workers ran at once, not one per worker
        assert families(scrape(server)) == FAMILIES
        assert httpx.get(f"{server.url}/metrics").status_code == 404  # not on the app's port
    print(f"{engine}: {sent} sent, {count} answered by the app and counted, {answered} "
          f"reached the client; files {files}")


@pytest.mark.demo_routes
@pytest.mark.slow
@pytest.mark.parametrize("engine", served.ENGINES)
def test_killed_workers_counts_stay_and_their_requests_leave_the_in_flight_gauge(
        engine: str) -> None:
    """Two requests in flight, then kill -9 every worker: once they are respawned, what
    the dead ones counted is still there, and the requests they were answering are no
    longer in flight."""
    args = ["--engine", engine, "--workers", "2", "--respawn-failed-workers"]
    with running_server(args, env={"WEBSERVER_ACCESS_LOG": "json"}) as server:
        launcher = server.process.pid
        answered = get_items(server.url, 40)
        # A kill -9 loses what its worker has not written yet (up to WRITE_SECONDS): what
        # stays is what was written before it.
        assert settled(lambda: scraped_count(scrape(server), ITEMS), answered) == answered
        sleepers = [threading.Thread(target=sleep_request, args=(server.url,)) for _ in range(2)]
        for thread in sleepers:
            thread.start()
        assert settled(lambda: in_flight(server), 2, seconds=5) == 2, scrape(server)
        killed = set(workers(launcher))
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while killed & set(workers(launcher)) or len(workers(launcher)) < 2:
            assert time.monotonic() < deadline, (
                f"the killed workers were not replaced: {workers(launcher)}\n"
                f"{server.output()[-3000:]}")
            time.sleep(0.2)
        answered += get_items(server.url, 40)
        for thread in sleepers:
            thread.join()
        count = ledger(server, answered)
        assert answered <= count <= 80, (answered, count)  # see ledger
        # Written by the workers every 0.25 s (app/core/metrics.py).
        assert settled(lambda: scraped_count(scrape(server), ITEMS), count) == count
        assert settled(lambda: in_flight(server), 0) == 0, scrape(server)
        assert metric_files(launcher) == ["w0", "w1"]


@pytest.mark.demo_routes
@pytest.mark.slow
@pytest.mark.parametrize("engine", served.ENGINES)
def test_metrics_at_a_path_of_the_app_port(engine: str) -> None:
    env = {"WEBSERVER_METRICS": "path"}
    with running_server(["--engine", engine, "--workers", "2"], env=env) as server:
        answered = get_items(server.url, 10)

        def at_path() -> float:
            return scraped_count(httpx.get(f"{server.url}/metrics").text, ITEMS)

        # Written by the workers every 0.25 s (app/core/metrics.py).
        assert settled(at_path, 10) == answered == 10
        text = httpx.get(f"{server.url}/metrics").text
        with pytest.raises(httpx.TransportError):  # no listener of its own
            httpx.get(server.metrics_url, timeout=2)
    assert families(text) == FAMILIES
    ((info, _),) = scraped(text, "webserver_info")
    assert (info["engine"], info["workers"]) == (engine, "2")


def test_a_failed_write_does_not_stop_the_next_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writes' timer goes on after a write fails (a full disk): the durations noted
    since are written by the next one, not held in memory for the worker's life."""
    import asyncio

    from app.middleware import metrics as layer

    calls: list[float] = []
    real = layer.write_batches

    def failing_once() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        real()

    monkeypatch.setattr(layer, "write_batches", failing_once)

    async def ok(scope: dict, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        app = layer.MetricsMiddleware(ok)

        async def sent(message: dict) -> None:
            pass

        await app({"type": "http", "method": "GET", "path": "/x", "headers": []},
                  None, sent)
        await asyncio.sleep(layer.WRITE_SECONDS * 4.5)

    asyncio.run(run())
    assert len(calls) >= 3, calls
