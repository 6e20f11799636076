"""Prometheus metrics: the same names and labels on every engine, summed over workers.

Workers write to files in the run's PROMETHEUS_MULTIPROC_DIR (prometheus-client's
multiprocess mode), named by *slot*, not by pid (prometheus/client_python#115): a worker
locks the first free `slot-N.lock` (`flock`, freed by the kernel however it dies) and
goes on from the files its predecessor left, so counts neither vanish nor double and the
files stay as many as the workers. A scrape drops the live gauges of unlocked slots.
Histograms are added up in the worker and written every WRITE_SECONDS (`write_batches`),
since each write to a file takes a lock; docs/observability.md has the rest.
"""

from __future__ import annotations

import fcntl
import os
import platform
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core import request_durations
from app.core.request_durations import RequestDurations

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "unmatched"  # the route label of a request no route matched
OTHER_METHOD = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT",
                     "TRACE"})
# A status's class label; 5xx for anything else, a request that ended with no response
# started (status 0) included.
STATUS_CLASSES = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}
SERVER_ERROR = "5xx"
METRICS_PATH = "/metrics"
RUN_LOCK = "run.lock"
SLOT_LOCK = "slot-{}.lock"


@dataclass
class ServerMetrics:
    """The metric objects of this process (created once, by `server_metrics`)."""

    durations: RequestDurations  # method, route, status_class; its count is the requests
    in_flight: Any  # Gauge
    info: Any  # Gauge: engine, loop, parser, python, workers


_metrics: ServerMetrics | None = None
_slot: dict[str, Any] = {"name": "", "fd": -1}
WRITE_SECONDS = 0.25  # how often the metrics layer writes the batches


def server_metrics() -> ServerMetrics:
    """This process's metrics, created on first use: in multiprocess mode when the
    launcher set PROMETHEUS_MULTIPROC_DIR (served), in memory otherwise (tests, `bench`)."""
    global _metrics
    if _metrics is None:
        _metrics = _create()
    return _metrics


def _create() -> ServerMetrics:
    from prometheus_client import REGISTRY, Gauge, values

    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        _take_slot(directory)
        _durations.load(directory, _slot["name"])
        # prometheus-client's own hook for how files are named, with the rule its
        # docstring sets: distinct in processes running at the same time.
        values.ValueClass = batched(values.MultiProcessValue(process_identifier=_slot_name))
        os.register_at_fork(after_in_child=_forked)
    else:
        REGISTRY.register(request_durations.InMemory(_durations))  # type: ignore[arg-type]
    metrics = ServerMetrics(
        durations=_durations,
        in_flight=Gauge("http_server_active_requests", "HTTP requests being answered, "
                        "sampled every 0.25 s", multiprocess_mode="livesum"),
        info=Gauge("webserver_info", "What serves the app: engine, loop, HTTP parser, "
                   "Python, workers", ["engine", "loop", "parser", "python", "workers"],
                   multiprocess_mode="max"),
    )
    _started(metrics)
    return metrics


def _started(metrics: ServerMetrics) -> None:
    """What a worker sets when it starts, also in a slot a dead worker left."""
    from app.core.settings import get_settings

    settings = get_settings()
    metrics.in_flight.set(0)
    metrics.info.labels(settings.engine, settings.resolved_loop, settings.resolved_http,
                        platform.python_version(), str(settings.workers)).set(1)


class _Batches:
    """The histogram values with observations not yet in their files."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        # Observations come from the loop; yours may come from threads (sync routes).
        self.lock = threading.Lock()

    def forget(self) -> None:
        """In a forked child: the parent's observations are the parent's to write."""
        for value in self.pending:
            value.pending = 0.0
        self.pending.clear()
        self.lock = threading.Lock()


_batches = _Batches()
_durations = RequestDurations()  # the metrics layer adds each request (on the loop)


def batched(in_files: type) -> type:
    """prometheus-client's value class for files, with a histogram's increments added
    up here until `write_batches`; every other value as prometheus-client makes it."""

    class BatchedValue:
        _multiprocess = True
        __slots__ = ("pending", "written")

        def __new__(cls, typ: str, *args: Any, **kwargs: Any) -> Any:
            if typ != "histogram":
                return in_files(typ, *args, **kwargs)
            return super().__new__(cls)

        def __init__(self, typ: str, *args: Any, **kwargs: Any) -> None:
            self.written = in_files(typ, *args, **kwargs)
            self.pending = 0.0

        def inc(self, amount: float) -> None:
            with _batches.lock:
                if not self.pending:
                    _batches.pending.append(self)
                self.pending += amount

        def set(self, value: float, timestamp: float | None = None) -> None:
            with _batches.lock:
                self.pending = 0.0
                self.written.set(value, timestamp)

        def get(self) -> float:
            return float(self.written.get() + self.pending)

        def set_exemplar(self, exemplar: Any) -> None:
            self.written.set_exemplar(exemplar)

        def get_exemplar(self) -> Any:
            return self.written.get_exemplar()

    return BatchedValue


def write_batches() -> None:
    """Write the request durations counted, and the histograms' observations added up,
    since the last call to their files."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory and _slot["name"]:
        _durations.write(directory, _slot["name"])
    with _batches.lock:
        for value in _batches.pending:
            amount, value.pending = value.pending, 0.0
            if amount:
                value.written.inc(amount)
        _batches.pending.clear()


def _slot_name() -> str:
    return _slot["name"]


def _take_slot(directory: str) -> None:
    """Lock the first free slot of the run directory for this process's lifetime."""
    number = 0
    while True:
        fd = os.open(os.path.join(directory, SLOT_LOCK.format(number)),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            number += 1
            continue
        _slot.update(name=f"w{number}", fd=fd)
        return


def _forked() -> None:
    """A child forked after the metrics were made (a server that loads the app before
    forking its workers) shares its parent's lock: it takes a slot of its own, and
    prometheus-client, seeing a new name, reopens its files under it."""
    inherited = _slot["fd"]
    _batches.forget()
    _take_slot(os.environ[MULTIPROC_ENV])
    _durations.load(os.environ[MULTIPROC_ENV], _slot["name"])  # not the parent's table
    os.close(inherited)  # the parent still holds the lock through its own descriptor
    if _metrics is not None:
        _started(_metrics)


def slot_of(lock: Path) -> str:
    return "w" + lock.stem.removeprefix("slot-")


def free_slots(directory: str | Path) -> Iterator[str]:
    """Slots no live process holds, each locked while the caller uses it."""
    for lock in sorted(Path(directory).glob(SLOT_LOCK.format("*"))):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # held: a live worker (or this process) owns it
            continue
        try:
            yield slot_of(lock)
        finally:
            os.close(fd)


def forget_dead_workers(directory: str | Path) -> None:
    """Remove the live gauges (requests in flight) of slots whose worker is gone."""
    from prometheus_client.multiprocess import mark_process_dead

    for slot in free_slots(directory):
        mark_process_dead(slot, str(directory))


class _WorkersCollector:
    """Every worker's files, summed, after the dead ones' live gauges are dropped."""

    def __init__(self, directory: str) -> None:
        from prometheus_client.multiprocess import MultiProcessCollector

        self.directory = directory
        self.files = MultiProcessCollector(None, path=directory)

    def collect(self) -> Iterable[Any]:
        forget_dead_workers(self.directory)
        return self.files.collect()


def registry() -> Any:
    """What a scrape reads: every worker's files when served, this process otherwise."""
    from prometheus_client import REGISTRY, CollectorRegistry

    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return REGISTRY
    scraped = CollectorRegistry()
    scraped.register(_WorkersCollector(directory))  # type: ignore[arg-type]
    scraped.register(request_durations.InFiles(directory))  # type: ignore[arg-type]
    return scraped


def asgi_app() -> Any:
    """/metrics as an ASGI app (WEBSERVER_METRICS=path): prometheus-client's own."""
    from prometheus_client import make_asgi_app

    return make_asgi_app(registry())
