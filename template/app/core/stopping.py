"""`server_stopping`: how your code learns that this worker's server is stopping.

Set in each worker as soon as it is told to stop (SIGTERM, a reload, a recycle), on every
engine, before the server waits for what is still open: a stream that awaits
`server_stopping.wait(timeout=...)` between events can send its last one and finish. A
stream or WebSocket still open WEBSERVER_STREAM_STOP_TIMEOUT seconds after the stop is
ended for it (app/middleware/open_streams.py), then the lifespan's shutdown runs; a
request not yet answered keeps the whole WEBSERVER_GRACEFUL_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ServerStopping:
    """A flag set once per process, readable from any thread and awaitable on any
    event loop (a worker has one; a test may run several in turn), or on trio
    (Hypercorn's trio worker)."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        # The flag's own read, no call of ours around it: every answer's start asks
        # (fused_layers.py, open_streams.py). Bound to this Event: never replace `flag`.
        self.is_set: Callable[[], bool] = self.flag.is_set
        # (how to call into that loop from any thread, the event set there)
        self.waiters: set[tuple[Callable[[Callable[[], object]], object], Any]] = set()
        # Re-entrant: `set` may run in a signal handler on a thread that holds it.
        self.lock = threading.RLock()

    async def wait(self, timeout: float | None = None) -> bool:
        """Until the server stops (True) or `timeout` seconds pass (False)."""
        if self.flag.is_set():
            return True
        try:
            waiter = (asyncio.get_running_loop().call_soon_threadsafe, asyncio.Event())
        except RuntimeError:  # no asyncio loop: trio's (awaited out of this handler)
            waiter = None
        if waiter is None:
            return await self.wait_on_trio(timeout)
        with self.lock:
            self.waiters.add(waiter)
        try:
            if self.flag.is_set():  # set between the check and the registration
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter[1].wait(), timeout)
            return self.flag.is_set()
        finally:
            with self.lock:
                self.waiters.discard(waiter)

    async def wait_on_trio(self, timeout: float | None) -> bool:
        import trio

        waiter = (trio.lowlevel.current_trio_token().run_sync_soon, trio.Event())
        with self.lock:
            self.waiters.add(waiter)
        try:
            if self.flag.is_set():
                return True
            with trio.move_on_after(math.inf if timeout is None else timeout):
                await waiter[1].wait()
            return self.flag.is_set()
        finally:
            with self.lock:
                self.waiters.discard(waiter)

    def set(self) -> None:
        """Called by the serving layer; safe from a signal handler or another thread."""
        self.flag.set()
        with self.lock:
            waiters = list(self.waiters)
        for call_soon, event in waiters:
            # That loop has closed (trio's RunFinishedError is a RuntimeError too).
            with contextlib.suppress(RuntimeError):
                call_soon(event.set)


server_stopping = ServerStopping()


@dataclass
class Open:
    kind: str  # "http" or "websocket"
    name: str  # "GET /demo/events", "WebSocket /ws/echo"
    since: float = field(default_factory=time.monotonic)
    streaming: bool = False  # an answer begun without a Content-Length, or a WebSocket accepted
    done: bool = False  # its last body chunk sent, or its close
    cut: bool = False  # cancelled by this layer at the stop


class OpenStreams:
    """The requests of this process in flight, by task, and the end of each stream
    still open at the stop."""

    def __init__(self) -> None:
        self.open: dict[asyncio.Task[object], Open] = {}
        self.on_trio: dict[Any, Open] = {}  # trio cancels by scope: by trio.CancelScope
        self.watchers: set[object] = set()  # asyncio loops, trio runs' tokens
        self.stop_timeout = 1.0

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop not in self.watchers:
            self.watchers.add(loop)
            loop.create_task(self.end_at_stop(), name="end open streams at the stop")

    async def end_at_stop(self) -> None:
        await server_stopping.wait()
        deadline = time.monotonic() + self.stop_timeout
        loop = asyncio.get_running_loop()
        while (left := deadline - time.monotonic()) > 0 and self.streams(loop):
            await asyncio.sleep(min(left, 0.05))
        for task, entry in self.streams(loop):
            entry.cut = True
            task.cancel()

    def streams(self, loop: asyncio.AbstractEventLoop) -> list[tuple[asyncio.Task[object], Open]]:
        return [(task, entry) for task, entry in list(self.open.items())
                if entry.streaming and not entry.done and task.get_loop() is loop]

    def watch_trio(self) -> None:
        import trio

        token = trio.lowlevel.current_trio_token()
        if token not in self.watchers:
            self.watchers.add(token)
            trio.lowlevel.spawn_system_task(self.end_at_stop_on_trio)

    async def end_at_stop_on_trio(self) -> None:
        import trio

        await server_stopping.wait()
        deadline = time.monotonic() + self.stop_timeout
        while (left := deadline - time.monotonic()) > 0 and self.trio_streams():
            await trio.sleep(min(left, 0.05))
        for cut, entry in self.trio_streams():
            entry.cut = True
            cut.cancel()

    def trio_streams(self) -> list[tuple[Any, Open]]:
        return [(cut, entry) for cut, entry in list(self.on_trio.items())
                if entry.streaming and not entry.done]

    async def ended(self, timeout: float) -> None:
        """Once no stream is left open on this loop (or `timeout`): an engine that
        drops what is open as it stops waits for this first (serving/engines/granian.py)."""
        loop, deadline = asyncio.get_running_loop(), time.monotonic() + timeout
        while self.streams(loop) and time.monotonic() < deadline:  # a cut one included
            await asyncio.sleep(0.02)


OPEN_STREAMS = OpenStreams()
