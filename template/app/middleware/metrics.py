"""Prometheus metrics for every HTTP request (WEBSERVER_METRICS; app/core/metrics.py).

The outermost layer: it counts what the others answer too (a host refused, a 500,
a 499), and times the whole stack. A request is labelled by the template of the route
that served it (`/items/{item_id}`, from `scope["route"]`, which the router sets:
tests/test_routing.py), never by its path, so the series stay as few as the routes;
a request no route matched is `unmatched`, and a method outside the standard ones
`other`. WebSockets are not counted.

Cost (docs/benchmarks.md): a write to a multiprocess metric is a locked write to a
memory-mapped file, 1.4 us in a served request; a request made two. So they are
batched: a request adds its duration to the worker's histogram in memory
(app/core/metrics.py), and a timer on the worker's loop writes the batches, and the
requests in flight (a plain integer here), every WRITE_SECONDS, and once more when the
worker stops (the lifespan's end).
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.metrics import (
    METHODS,
    OTHER_METHOD,
    STATUS_CLASSES,
    UNMATCHED,
    WRITE_SECONDS,
    server_metrics,
    write_batches,
)
from app.middleware.messages import Message

SERVER_ERROR = 5  # the class of a request that ended with no response started
SHUTDOWN_DONE = "lifespan.shutdown.complete"


class MetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        metrics = server_metrics()
        self.duration, self.in_flight = metrics.duration, metrics.in_flight
        # (method, route, status // 100) -> histogram child, looked up once each:
        # prometheus-client's labels() costs about a microsecond.
        self.children: dict[tuple[str, str, int], Any] = {}
        self.active = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def _child(self, method: str, route: str, status_class: int) -> Any:
        shown = STATUS_CLASSES[status_class - 1] if 1 <= status_class <= 5 else "5xx"
        child = self.children[method, route, status_class] = self.duration.labels(
            method, route, shown)
        return child

    def _write(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        write_batches()
        self.in_flight.set(self.active)
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
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # the first request (of this loop: tests make several)
            self.loop = loop
            loop.call_later(WRITE_SECONDS, self._write, loop)
        status = 0

        def send_observed(message: Message) -> Any:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        self.active += 1
        started = perf_counter()
        try:
            await self.app(scope, receive, send_observed)
        finally:
            elapsed = perf_counter() - started
            self.active -= 1
            route = getattr(scope.get("route"), "path", UNMATCHED)
            method = scope["method"]
            if method not in METHODS:  # the caller's word: never a label or a key
                method = OTHER_METHOD
            key = (method, route, status // 100 or SERVER_ERROR)
            (self.children.get(key) or self._child(*key)).observe(elapsed)
