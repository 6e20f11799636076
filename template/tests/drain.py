"""Bounded load on 127.0.0.1 with a SIGTERM in the middle, and what happened to each request.

Each of `connections` keep-alive HTTP/1.1 connections sends one request at a time, and
opens a new connection after an answer that says `Connection: close`, as a client does.
A request counts as *sent before the signal* when its last byte was written before
the signal; each such request must come back 200. A request sent after the signal
may be refused (the server stops accepting), but never cut off mid-response.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bench.http1 import ResponseReader


@dataclass
class Outcome:
    sent_at: float
    status: int | None = None
    error: str | None = None
    partial: bool = False  # some response bytes arrived before the failure


@dataclass
class DrainReport:
    signal_at: float
    exited_after: float | None
    exit_code: int | None
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def before(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.sent_at < self.signal_at]

    @property
    def lost_before_signal(self) -> list[Outcome]:
        return [o for o in self.before if o.status != 200]

    @property
    def cut_mid_response(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.partial]

    def summary(self) -> str:
        after = [o for o in self.outcomes if o.sent_at >= self.signal_at]
        refused_after = sum(1 for o in after if o.status is None)
        return (
            f"{len(self.before)} sent before SIGTERM, {len(self.lost_before_signal)} of them "
            f"lost; {len(after)} sent after, {refused_after} refused; "
            f"{len(self.cut_mid_response)} cut mid-response; exit {self.exit_code} after "
            f"{self.exited_after if self.exited_after is None else round(self.exited_after, 2)} s"
        )


async def _read_response(reader: asyncio.StreamReader, responses: ResponseReader,
                         outcome: Outcome) -> bool:
    """Until one whole response arrived, however its body is framed (bench/http1.py);
    whether the server keeps the connection open (as a client reads it: no
    `Connection: close`)."""
    while (response := responses.take(await reader.read(65536))) is None:
        outcome.partial = responses.mid_response
    outcome.status, outcome.partial = response.status, False
    return not response.closes


async def _connection(host: str, port: int, request: bytes, stop_at: list[float],
                      outcomes: list[Outcome], keep_alive: bool) -> None:
    reader = writer = None
    while time.monotonic() < stop_at[0]:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
                responses = ResponseReader()
        except OSError:
            await asyncio.sleep(0.01)  # refused: the server stopped accepting
            continue
        outcome = Outcome(sent_at=0.0)
        try:
            writer.write(request)
            await writer.drain()
            outcome.sent_at = time.monotonic()
            outcomes.append(outcome)
            kept_open = await _read_response(reader, responses, outcome)
            if not keep_alive or not kept_open:
                writer.close()
                reader = writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            if not outcome.sent_at:
                outcome.sent_at = time.monotonic()
                outcomes.append(outcome)
            outcome.error = type(error).__name__
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def _run(url: str, stop: Callable[[], object], connections: int, signal_after: float,
               duration: float, keep_alive: bool,
               stall: tuple[Callable[[], object], float] | None,
               until: Callable[[], bool] | None, then: float) -> tuple[float, list[Outcome]]:
    parts = urlsplit(url)
    close = "" if keep_alive else "Connection: close\r\n"
    request = (
        f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n{close}\r\n"
    ).encode()
    outcomes: list[Outcome] = []
    stop_at = [time.monotonic() + duration]  # brought forward by `until`
    tasks = [asyncio.create_task(_connection(parts.hostname, parts.port, request,
                                             stop_at, outcomes, keep_alive))
             for _ in range(connections)]
    await asyncio.sleep(signal_after)
    if stall is not None:  # the server stops running while the clients go on
        pause, seconds = stall
        pause()
        await asyncio.sleep(seconds)
    signal_at = time.monotonic()
    stop()
    while until is not None and time.monotonic() < stop_at[0]:
        if await asyncio.to_thread(until):
            stop_at[0] = min(stop_at[0], time.monotonic() + then)
            break
        await asyncio.sleep(0.2)
    await asyncio.gather(*tasks)
    return signal_at, outcomes


def drive_and_stop(url: str, stop: Callable[[], object], wait: Callable[[], int | None], *,
                   connections: int = 64, signal_after: float = 1.0, duration: float = 3.0,
                   grace: float = 15.0, keep_alive: bool = True,
                   stall: tuple[Callable[[], object], float] | None = None,
                   until: Callable[[], bool] | None = None,
                   then: float = 1.0) -> DrainReport:
    """Load `url` with `connections` connections; call `stop` after `signal_after` s.

    `wait` blocks until the server has exited and returns its exit code. With `stall`
    (pause, seconds), `pause` is called that long before `stop`. With `until`, the load
    ends `then` seconds after `until()` is first true (polled after `stop`), or at
    `duration` if it never is.
    """
    exited: list[tuple[float, int | None]] = []

    def wait_for_exit() -> None:
        code = wait()
        exited.append((time.monotonic(), code))

    waiter = threading.Thread(target=wait_for_exit, daemon=True)
    waiter.start()
    signal_at, outcomes = asyncio.run(
        _run(url, stop, connections, signal_after, duration, keep_alive, stall, until, then)
    )
    waiter.join(timeout=grace)
    if not exited:
        return DrainReport(signal_at, None, None, outcomes)
    return DrainReport(signal_at, exited[0][0] - signal_at, exited[0][1], outcomes)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (workers), from /proc."""
    tree, index = [pid], 0
    while index < len(tree):
        tasks = f"/proc/{tree[index]}/task"
        for task in os.listdir(tasks) if os.path.isdir(tasks) else ():
            with open(f"{tasks}/{task}/children") as children:
                tree.extend(int(child) for child in children.read().split())
        index += 1
    return tree


def drive_and_terminate(url: str, process: subprocess.Popen[bytes], *, stall: float = 0.0,
                        **load: Any) -> DrainReport:
    """`drive_and_stop` with SIGTERM to `process` as the stop.

    With `stall`, the processes that accept connections (the workers, or the single
    process) are stopped (SIGSTOP) that many seconds before SIGTERM, as when the
    machine takes the core away: the connections the clients make meanwhile wait in
    the listen queue. A single process is continued just before SIGTERM; workers one
    second after it, once their main process has passed the signal on.
    """
    stopped: list[int] = []

    def pause() -> None:
        tree = process_tree(process.pid)
        stopped.extend(tree[1:] or tree)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)

    def resume() -> None:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)

    def stop() -> None:
        if stopped == [process.pid]:
            # Continued first: a signal that arrives while a process is stopped may go
            # to any of its threads, where a main thread waiting on a lock misses it.
            resume()
            os.kill(process.pid, signal.SIGTERM)
        else:
            os.kill(process.pid, signal.SIGTERM)
            threading.Timer(1.0, resume).start()

    return drive_and_stop(url, stop, process.wait, stall=(pause, stall) if stall else None,
                          **load)
