"""What the route costs with no server at all: the ASGI app called in-process.

The difference between this and the server's CPU per request is what an engine can
change; on typical FastAPI routes the app's own share dominates.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from bench.route import Route

CONCURRENCY = 64  # like the load drivers, so awaiting routes overlap
# A slice of 4 x 64 calls is ~10-20 ms of a trivial route: short enough that a
# disturbance spoils few slices, long enough for the CPU clock.
SLICE_BATCHES = 4


def request_scope(route: Route, state: dict[str, Any] | None = None) -> dict[str, Any]:
    path, _, query = route.path.partition("?")
    headers = [(b"host", b"localhost"),  # an allowed host (WEBSERVER_ALLOWED_HOSTS)
               *((k.lower().encode(), v.encode()) for k, v in route.headers)]
    if route.body:
        headers.append((b"content-length", str(len(route.body)).encode()))
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": route.method, "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": query.encode(), "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "extensions": {},
        "state": dict(state or {}),  # a copy of the lifespan's, as servers give it
    }


async def _call(app: Callable[..., Any], route: Route,
                state: dict[str, Any] | None = None) -> int:
    status = 0
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if sent_body:
            await asyncio.sleep(3600)  # a client that stays connected
        sent_body = True
        return {"type": "http.request", "body": route.body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(request_scope(route, state), receive, send)
    return status


async def warm_up(app: Callable[..., Any], route: Route,
                  state: dict[str, Any] | None = None) -> None:
    """One round of concurrent calls; refuses a route that does not answer 2xx."""
    statuses = await asyncio.gather(*(_call(app, route, state) for _ in range(CONCURRENCY)))
    if not all(200 <= s < 300 for s in statuses):
        raise ValueError(f"{route.method} {route.path} answered {statuses[0]} in-process")


async def cpu_per_request(app: Callable[..., Any], route: Route, batches: int,
                          state: dict[str, Any] | None = None) -> float:
    """CPU microseconds per request over `batches` rounds of concurrent calls."""
    cpu_start = time.process_time()
    for _ in range(batches):
        await asyncio.gather(*(_call(app, route, state) for _ in range(CONCURRENCY)))
    return (time.process_time() - cpu_start) / (batches * CONCURRENCY) * 1e6


@contextlib.asynccontextmanager
async def lifespan(app: Callable[..., Any]) -> AsyncIterator[dict[str, Any]]:
    """The app's lifespan around the calls, as a server runs it (a database's pool is
    opened in it): its startup before the first call, its shutdown after the last; its
    state, which each request gets a copy of."""
    to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    state: dict[str, Any] = {}
    running = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"},
                                       "state": state}, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    answer = asyncio.create_task(from_app.get())
    await asyncio.wait({answer, running}, return_when=asyncio.FIRST_COMPLETED)
    if not answer.done() or answer.result()["type"] != "lifespan.startup.complete":
        answer.cancel()
        running.cancel()
        said = answer.result().get("message", "") if answer.done() else "it ended"
        raise ValueError(f"the app's lifespan did not start: {said}")
    try:
        yield state
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        await from_app.get()
        await running


def app_cpu_us_per_request(route: Route, seconds: float = 1.0) -> float:
    """CPU microseconds one request costs the app itself (middleware included): the
    median of short slices over `seconds`, inside the app's lifespan."""
    from app.main import create_app

    app = create_app()

    async def run() -> float:
        async with lifespan(app) as state:
            await warm_up(app, route, state)
            costs: list[float] = []
            wall_end = time.perf_counter() + seconds
            while not costs or time.perf_counter() < wall_end:
                costs.append(await cpu_per_request(app, route, SLICE_BATCHES, state))
        return statistics.median(costs)

    return asyncio.run(run())
