"""Prometheus metrics for every HTTP request (WEBSERVER_METRICS; app/core/metrics.py).

The outermost layer: it counts what the others answer too (a host refused, a 500,
a 499), and times the whole stack. A request is labelled by the template of the route
that served it (`/items/{item_id}`, from `scope["route"]`, which the router sets:
tests/test_routing.py), never by its path, so the series stay as few as the routes;
a request no route matched is `unmatched`, and a method outside the standard ones
`other`. WebSockets are not counted.

Cost (docs/benchmarks.md): each write to a multiprocess metric is a locked write to
a memory-mapped file, 1.4 µs in a served request, and they are what this layer costs.
So a request makes two, the histogram's sum and bucket (its count, the number of
requests, is worked out from the buckets when scraped); the requests in flight are
kept in a plain integer and written once a second, by a timer on the worker's loop.
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.metrics import METHODS, OTHER_METHOD, STATUS_CLASSES, UNMATCHED, server_metrics
from app.middleware.messages import Message

SERVER_ERROR = 5  # the class of a request that ended with no response started
IN_FLIGHT_SECONDS = 1.0  # how often the requests in flight are written


class MetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        metrics = server_metrics()
        self.duration, self.in_flight = metrics.duration, metrics.in_flight
        # (method, route, status // 100) -> histogram child, looked up once each:
        # prometheus-client's labels() costs about a microsecond.
        self.children: dict[tuple[str, str, int], Any] = {}
        self.active = 0
        self.loop: object = None  # the asyncio loop, or the trio run's token

    def _child(self, method: str, route: str, status_class: int) -> Any:
        shown = STATUS_CLASSES[status_class - 1] if 1 <= status_class <= 5 else "5xx"
        child = self.children[method, route, status_class] = self.duration.labels(
            method, route, shown)
        return child

    def _publish(self, loop: asyncio.AbstractEventLoop) -> None:
        self.in_flight.set(self.active)
        if loop is self.loop and not loop.is_closed():
            loop.call_later(IN_FLIGHT_SECONDS, self._publish, loop)

    def _watch_trio(self) -> None:
        """trio has no call_later: a task of its own writes the gauge (one per run)."""
        import trio

        token = trio.lowlevel.current_trio_token()
        if token is not self.loop:
            self.loop = token
            trio.lowlevel.spawn_system_task(self._publish_on_trio, token)

    async def _publish_on_trio(self, token: object) -> None:
        import trio

        while token is self.loop:
            await trio.sleep(IN_FLIGHT_SECONDS)
            self.in_flight.set(self.active)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no asyncio loop: Hypercorn's trio worker
            self._watch_trio()
        else:
            if loop is not self.loop:  # the first request (of this loop: tests make several)
                self.loop = loop
                loop.call_later(IN_FLIGHT_SECONDS, self._publish, loop)
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
