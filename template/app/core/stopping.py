"""`server_stopping`: how your code learns that this worker's server is stopping.

Set in each worker as soon as it is told to stop (SIGTERM, a reload on SIGHUP, a
recycle), on every engine, before the server waits for what is still open. A stream
that looks at it can send its last event and finish:

    async def events() -> AsyncIterator[str]:
        while not server_stopping.is_set():
            yield "data: tick\\n\\n"
            await server_stopping.wait(timeout=1.0)  # a tick, or the stop
        yield "event: bye\\ndata: the server is restarting\\n\\n"

A stream or WebSocket still open WEBSERVER_STREAM_STOP_TIMEOUT seconds after the stop
is ended by the server (serving/open_streams.py): your generator is cancelled, the
stream is closed properly, a WebSocket gets close code 1012. Your lifespan's shutdown
runs after that. Requests that have not started their answer keep the whole
WEBSERVER_GRACEFUL_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Callable
from typing import Any


class ServerStopping:
    """A flag set once per process, readable from any thread and awaitable on any
    event loop (a worker has one; a test may run several in turn), or on trio
    (Hypercorn's trio worker)."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        # Its read is the flag's own (no call of ours around it): every answer's start
        # asks (app/middleware/fused_layers.py, serving/open_streams.py). Bound to this
        # Event: set and clear `flag`, never replace it.
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
