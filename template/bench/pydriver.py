"""The bundled load driver: HTTP/1.1 keep-alive, one request in flight per connection.

Responses are read whole (http1.py: Content-Length, chunked, or to the close; a
connection the server closes is replaced). Run as its own process
(`python -m bench.pydriver URL CONNECTIONS SECONDS ROUTE_JSON`)
so it can be pinned to its own core; prints one JSON line with the counted figures.
Measured on the development machine: on uvloop it saturates granian using 0.44 of a
core; on the stock asyncio loop it tops out near 34k requests/s.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.http1 import Response, ResponseError, ResponseReader


class Connection(asyncio.Protocol):
    """One keep-alive connection: a request, its whole response, the next request."""

    def __init__(self, request: bytes, method: str, stats: Stats) -> None:
        self.request, self.stats = request, stats
        self.reader = ResponseReader(method)
        self.sent_at = 0.0
        self.in_flight = False
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.send()

    def send(self) -> None:
        if time.perf_counter() >= self.stats.stop_at:
            self.transport.close()
            return
        self.sent_at, self.in_flight = time.perf_counter(), True
        self.transport.write(self.request)  # type: ignore[attr-defined]

    def done(self, response: Response) -> None:
        self.in_flight = False
        self.stats.record(response.status, time.perf_counter() - self.sent_at)

    def data_received(self, data: bytes) -> None:
        try:
            responses = self.reader.feed(data)
        except ResponseError:
            self.stats.failed += 1
            self.in_flight = False
            self.transport.close()
            return
        for response in responses:
            self.done(response)
            if response.closes:  # the server closes: a new connection takes over
                self.transport.close()
                return
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            last = self.reader.eof()  # a body that ran to the close ends here
        except ResponseError:
            last = None
        if last is not None:
            self.done(last)
        elif self.in_flight and time.perf_counter() < self.stats.stop_at:
            self.stats.failed += 1
        if not self.closed.done():
            self.closed.set_result(None)


class Stats:
    def __init__(self, stop_at: float) -> None:
        self.stop_at = stop_at
        self.latencies: list[float] = []
        self.non_2xx = 0
        self.failed = 0

    def record(self, status: int, latency: float) -> None:
        self.latencies.append(latency)
        if not 200 <= status < 300:
            self.non_2xx += 1


def percentile(ordered: list[float], share: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


async def keep_connected(host: str, port: int, request: bytes, method: str,
                         stats: Stats) -> None:
    """One connection slot: reconnects after a close until the time is up."""
    loop = asyncio.get_running_loop()
    while time.perf_counter() < stats.stop_at:
        try:
            _, protocol = await loop.create_connection(
                lambda: Connection(request, method, stats), host, port)
        except OSError:
            stats.failed += 1
            return
        await protocol.closed


async def run(url: str, connections: int, seconds: float, route: dict) -> dict:
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    body = route["body"].encode("latin-1")
    headers = [f"Host: {parts.netloc}", *(f"{k}: {v}" for k, v in route["headers"])]
    if body:
        headers.append(f"Content-Length: {len(body)}")
    request = (f"{route['method']} {target} HTTP/1.1\r\n" + "\r\n".join(headers)
               + "\r\n\r\n").encode("latin-1") + body
    started = time.perf_counter()
    stats = Stats(started + seconds)
    await asyncio.gather(*(keep_connected(parts.hostname or "127.0.0.1", parts.port or 80,
                                          request, route["method"], stats)
                           for _ in range(connections)))
    elapsed = time.perf_counter() - started
    ordered = sorted(stats.latencies)
    return {
        "requests": len(ordered), "seconds": elapsed, "non_2xx": stats.non_2xx,
        "failed": stats.failed, "p50_ms": percentile(ordered, 0.50),
        "p95_ms": percentile(ordered, 0.95), "p99_ms": percentile(ordered, 0.99),
        "mean_ms": sum(ordered) / len(ordered) * 1000 if ordered else None,
    }


def main(argv: list[str]) -> None:
    url, connections, seconds, route_file = argv
    route = json.loads(Path(route_file).read_text())
    coroutine = run(url, int(connections), float(seconds), route)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(coroutine)
    else:
        result = uvloop.run(coroutine)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
