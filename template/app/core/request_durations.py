"""The request-duration histogram: counted in the worker, written to its slot's files in
batches, summed over the slots' files at a scrape; the same name, labels, buckets and
samples as prometheus-client's histogram, whose observe takes locks and has no batch API.

A request costs a bisection and two additions. Every WRITE_SECONDS the table is written
in place (`pwrite`: a rename over the last file stalls the loop on ext4) to the older of
two files, `durations-<slot>.a` and `.b`, with a sequence number, length and CRC-32, so a
scrape reads the newest whole table, never half of one. Not served (tests, `bench`), the
table is read in memory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import struct
import zlib
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
FILE = "durations-{slot}.{side}"
SIDES = ("a", "b")  # written in turn
# Before each table: its sequence number (the newer side is the higher) and its length,
# then the CRC-32 of those and the table (a side being written does not match it).
NUMBERS = struct.Struct("<QQ")
CRC = struct.Struct("<I")
HEADER_SIZE = NUMBERS.size + CRC.size
TRIES = 3  # reads of a slot whose two sides are both being written (a reader held up)

Key = tuple[str, str, str]


class RequestDurations:
    """This worker's table: per label values, the count in each bucket and the sum."""

    def __init__(self) -> None:
        self.rows: dict[Key, list[float]] = {}
        self.changed = False
        self.sequence = 0  # of the last table written
        self.files: dict[Path, int] = {}  # open, to write in place

    def add(self, key: Key, seconds: float) -> None:
        """One request (its method, route and status class; its duration)."""
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0.0] * (SUM + 1)
        row[bisect_left(BOUNDS, seconds)] += 1.0  # the first bucket whose bound is >= it
        row[SUM] += seconds
        self.changed = True

    def clear(self) -> None:
        self.rows.clear()
        self.changed = False

    def load(self, directory: str | Path, slot: str) -> None:
        """Go on from the newest table a predecessor in this slot left (none: from zero).
        Files this process had open (a parent's, in a forked child) are closed."""
        self.clear()
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()
        found = newest(Path(directory), slot)
        self.sequence, rows = found if found is not None else (0, {})
        self.rows.update(rows)

    def write(self, directory: str | Path, slot: str) -> None:
        """The table over the older of the slot's two files, if anything was added since
        the last write."""
        if not self.changed:
            return
        sequence = self.sequence + 1
        path = Path(directory) / FILE.format(slot=slot, side=SIDES[sequence % 2])
        fd = self.files.get(path)
        if fd is None:
            fd = self.files[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,
                                            0o600)
        table = json.dumps([[*key, row] for key, row in self.rows.items()]).encode()
        numbers = NUMBERS.pack(sequence, len(table))
        data = numbers + CRC.pack(zlib.crc32(table, zlib.crc32(numbers))) + table
        # A full disk writes part and says so only in the count: the other side keeps
        # the last whole table, and the next write tries this side again.
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(errno.ENOSPC, f"{path}: only part of the request durations written")
        self.sequence = sequence
        self.changed = False


def read(path: Path) -> tuple[int, dict[Key, list[float]]] | None:
    """A side's sequence number and table; None while it is being written (or was cut
    by a kill -9 in a write)."""
    data = path.read_bytes()
    if len(data) < HEADER_SIZE:
        return None
    sequence, length = NUMBERS.unpack_from(data)
    (crc,) = CRC.unpack_from(data, NUMBERS.size)
    table = data[HEADER_SIZE:HEADER_SIZE + length]
    if len(table) != length or zlib.crc32(table, zlib.crc32(data[:NUMBERS.size])) != crc:
        return None
    return sequence, {(method, route, status_class): row
                      for method, route, status_class, row in json.loads(table)}


def newest(directory: Path, slot: str) -> tuple[int, dict[Key, list[float]]] | None:
    """The slot's newest whole table, with its sequence number; None before a first one."""
    for _ in range(TRIES):
        found, present = [], False
        for side in SIDES:
            with contextlib.suppress(FileNotFoundError):
                table = read(directory / FILE.format(slot=slot, side=side))
                present = True
                if table is not None:
                    found.append(table)
        if found or not present:
            return max(found, key=lambda table: table[0], default=None)
    return None


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
        slots = sorted({path.name.split(".")[0].removeprefix("durations-")
                        for path in self.directory.glob(FILE.format(slot="*", side="*"))})
        tables = [found[1] for slot in slots
                  if (found := newest(self.directory, slot)) is not None]
        yield family(summed(tables))


class InMemory:
    """A collector: this process's table, not served (tests, `bench`)."""

    def __init__(self, table: RequestDurations) -> None:
        self.table = table

    def collect(self) -> Iterator[Any]:
        yield family(self.table.rows)
