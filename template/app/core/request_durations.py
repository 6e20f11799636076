"""The request-duration histogram: counted in the worker, written to its slot's file in
batches, summed over the slots' files at a scrape.

prometheus-client's histogram costs each observation a walk of its buckets and two
writes, each under a lock, and its public API has no way to add many observations at
once: 1-2 µs of a served request even when made in batches (docs/benchmarks.md). Here a
request costs a bisection and two additions to this worker's table, and every
WRITE_SECONDS (app/core/metrics.py) the worker writes the whole table to
`durations-<slot>.json` in the run's directory: a temporary file renamed over the last
one, so a scrape reads one table or the one before, never half of one. The slots are
app/core/metrics.py's: a worker that takes a slot goes on from the table its
predecessor left, so counts neither vanish nor double, and there are as many files as
workers ever ran at once. A `kill -9` loses what was counted since the last write, at
most WRITE_SECONDS. Not served (tests, `bench`), the table is read in memory.

The metric is the one it was as prometheus-client's histogram: the same name, labels,
buckets (prometheus-client's defaults) and samples.
"""

from __future__ import annotations

import contextlib
import json
import os
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

NAME = "http_server_request_duration_seconds"
DOCUMENTATION = ("HTTP requests by route template, method and status class, and the time "
                 "from each request to the end of its response")
LABELS = ("method", "route", "status_class")
# prometheus-client's default buckets, in seconds; +Inf after the last.
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
SUM = len(BOUNDS) + 1  # a row: one count per bucket (+Inf last), then the seconds' sum
FILE = "durations-{slot}.json"

Key = tuple[str, str, str]


class RequestDurations:
    """This worker's table: per label values, the count in each bucket and the sum."""

    def __init__(self) -> None:
        self.rows: dict[Key, list[float]] = {}
        self.changed = False

    def add(self, key: Key, seconds: float) -> None:
        """One request (its method, route and status class; its duration)."""
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0.0] * (SUM + 1)
        row[bisect_left(BOUNDS, seconds)] += 1  # the first bucket whose bound is >= it
        row[SUM] += seconds
        self.changed = True

    def clear(self) -> None:
        self.rows.clear()
        self.changed = False

    def load(self, directory: str | Path, slot: str) -> None:
        """Go on from the table a predecessor in this slot left (none: from zero)."""
        self.clear()
        with contextlib.suppress(FileNotFoundError):
            self.rows.update(read(Path(directory) / FILE.format(slot=slot)))

    def write(self, directory: str | Path, slot: str) -> None:
        """The table to the slot's file, if anything was added since the last write."""
        if not self.changed:
            return
        path = Path(directory) / FILE.format(slot=slot)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps([[*key, row] for key, row in self.rows.items()]))
        temporary.replace(path)
        self.changed = False


def read(path: Path) -> dict[Key, list[float]]:
    return {(method, route, status_class): row
            for method, route, status_class, row in json.loads(path.read_text())}


def summed(tables: Iterable[dict[Key, list[float]]]) -> dict[Key, list[float]]:
    total: dict[Key, list[float]] = {}
    for table in tables:
        for key, row in table.items():
            into = total.setdefault(key, [0.0] * (SUM + 1))
            for index, value in enumerate(row):
                into[index] += value
    return total


def family(table: dict[Key, list[float]]) -> Any:
    """The table as prometheus-client's histogram family (cumulative buckets)."""
    from prometheus_client.core import HistogramMetricFamily

    histogram = HistogramMetricFamily(NAME, DOCUMENTATION, labels=LABELS)
    for key, row in sorted(table.items()):
        cumulative, buckets = 0.0, []
        for bound, count in zip((*map(repr, BOUNDS), "+Inf"), row[:SUM], strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        histogram.add_metric(list(key), buckets, sum_value=row[SUM])
    return histogram


class InFiles:
    """A collector: every slot's file of the run's directory, summed."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def collect(self) -> Iterator[Any]:
        tables = []
        for path in sorted(self.directory.glob(FILE.format(slot="*"))):
            with contextlib.suppress(FileNotFoundError, ValueError):  # a slot's first write
                tables.append(read(path))
        yield family(summed(tables))


class InMemory:
    """A collector: this process's table, not served (tests, `bench`)."""

    def __init__(self, table: RequestDurations) -> None:
        self.table = table

    def collect(self) -> Iterator[Any]:
        yield family(self.table.rows)
