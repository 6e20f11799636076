"""Prometheus metrics for every HTTP request (WEBSERVER_METRICS; app/core/metrics.py).

Outside the template's other layers but the probes, the proxy headers and the streams'
end, so it counts what they answer too (a host refused, a 500, a 499) and times the
whole stack. A request is labelled by its route's template (`scope["route"]`), never its
path, so the series stay as few as the routes (`unmatched` when none matched, `other`
for a non-standard method). Durations go to the worker's table
(app/core/request_durations.py), written with the requests in flight every
WRITE_SECONDS and when the worker stops. WebSockets are not counted.
"""

from __future__ import annotations

import asyncio
import logging
from time import perf_counter
from typing import Any

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.metrics import (
    METHODS,
    OTHER_METHOD,
    SERVER_ERROR,
    STATUS_CLASSES,
    UNMATCHED,
    WRITE_SECONDS,
    server_metrics,
    write_batches,
)
from app.middleware.messages import Message

logger = logging.getLogger("app.server")
SHUTDOWN_DONE = "lifespan.shutdown.complete"


class MetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        metrics = server_metrics()
        self.in_flight = metrics.in_flight
        self.durations = metrics.durations  # written by the timer (app/core/metrics.py)
        self.active = 0
        self.loop: object = None  # the asyncio loop, or the trio run's token

    def _write(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        try:
            write_batches()
            self.in_flight.set(self.active)
        finally:  # a failed write (a full disk) is logged by the loop; the next one tries again
            if loop is not None and loop is self.loop and not loop.is_closed():
                loop.call_later(WRITE_SECONDS, self._write, loop)

    def lifespan(self, scope: Scope, receive: Receive, send: Send) -> Any:
        def send_written(message: Message) -> Any:
            if message["type"] == SHUTDOWN_DONE:  # the worker's last requests, written
                self._write()
            return send(message)

        return self.app(scope, receive, send_written)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.lifespan(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        status = 0

        def send_observed(message: Message) -> Any:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        started = self.begin()
        try:
            await self.app(scope, receive, send_observed)
        finally:
            self.observe(scope, status, started)

    def begin(self) -> float:
        """A request begins: counted in flight, the writes' timer running on this loop;
        its start time. (Also called by the fused layer, app/middleware/fused_layers.py.)"""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no asyncio loop: Hypercorn's trio worker
            self._watch_trio()
        else:
            if loop is not self.loop:  # the first request (of this loop: tests make several)
                self.loop = loop
                loop.call_later(WRITE_SECONDS, self._write, loop)
        self.active += 1
        return perf_counter()

    def _watch_trio(self) -> None:
        """trio has no call_later: a task of its own writes (one per run)."""
        import trio

        token = trio.lowlevel.current_trio_token()
        if token is not self.loop:
            self.loop = token
            trio.lowlevel.spawn_system_task(self._write_on_trio, token)

    async def _write_on_trio(self, token: object) -> None:
        import trio

        while token is self.loop:
            await trio.sleep(WRITE_SECONDS)
            try:
                self._write()
            except Exception:  # an error in a system task would end the whole trio run
                logger.exception("Writing the metrics failed; trying again in %s s.",
                                 WRITE_SECONDS)

    def observe(self, scope: Scope, status: int, started: float) -> None:
        """A request ended, answered with `status` (0: no response started)."""
        elapsed = perf_counter() - started
        self.active -= 1
        route = getattr(scope.get("route"), "path", UNMATCHED)
        method = scope["method"]
        if method not in METHODS:  # the caller's word: never a label or a key
            method = OTHER_METHOD
        self.durations.add((method, route, STATUS_CLASSES.get(status // 100, SERVER_ERROR)),
                           elapsed)
