"""Base for middleware that only adds headers to the response start.

Such middleware compose: `fused()` runs consecutive ones as a single ASGI layer (one
`send` wrapper, one header merge per response instead of one per middleware), which
is most of what the template's own middleware used to cost (docs/benchmarks.md).
Each class still works alone, and is tested alone, as plain ASGI middleware.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterable, Sequence
from typing import ClassVar

from starlette.types import ASGIApp, Receive, Scope, Send

from app.middleware.messages import Message, add_headers

Headers = list[tuple[bytes, bytes]]
SERVER_TIMING = b"server-timing"


class StartHeadersMiddleware(abc.ABC):  # noqa: B024 - abstract without abstract methods
    """Override any of: `static_headers` (the same on every response),
    `response_headers` (decided when the request arrives), `headers_at_start` (when
    the response starts). The fused layer calls only what a class overrides, and
    measures Server-Timing itself for a class that sets `server_timing`."""

    static_headers: ClassVar[Headers] = []
    server_timing: ClassVar[bool] = False
    # The names response_headers and headers_at_start may add, when known in advance.
    header_names: ClassVar[tuple[bytes, ...] | None] = None

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._alone: FusedStartHeaders | None = None

    def response_headers(self, scope: Scope) -> Headers:
        """Headers for this request's response, decided when the request arrives (may
        also record things in scope)."""
        return []

    def headers_at_start(self, scope: Scope) -> Headers:
        """Headers decided when the response starts (a duration, for one)."""
        return []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Used alone (not fused by create_app): a layer of one, built on first use.
        if self._alone is None:
            self._alone = FusedStartHeaders(self.app, (self,))
        await self._alone(scope, receive, send)


class FusedStartHeaders:
    """Several StartHeadersMiddleware as one ASGI layer, outermost first."""

    def __init__(self, app: ASGIApp, providers: Sequence[StartHeadersMiddleware] = ()) -> None:
        self.app = app
        # Looked up once, and only what each provider overrides: this runs per request.
        self.static = [header for p in providers for header in p.static_headers]
        self.early = tuple(p.response_headers for p in providers
                           if _overrides(p, "response_headers"))
        self.late = tuple(p.headers_at_start for p in providers
                          if _overrides(p, "headers_at_start"))
        self.timed = any(p.server_timing for p in providers)
        dynamic = [p.header_names for p in providers
                   if _overrides(p, "response_headers") or _overrides(p, "headers_at_start")]
        self.names = None if None in dynamic else frozenset([
            *(name for name, _ in self.static), *(n for names in dynamic for n in names or ()),
            *([SERVER_TIMING] if self.timed else []),
        ])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter() if self.timed else 0.0
        headers = self.static
        for early in self.early:
            headers = headers + early(scope)
        late, names = self.late, self.names

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = headers
                if started:
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    extra = [*extra, (SERVER_TIMING, b"app;dur=%.2f" % elapsed_ms)]
                for at_start in late:
                    extra = extra + at_start(scope)
                add_headers(message, extra, names)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _overrides(provider: StartHeadersMiddleware, method: str) -> bool:
    return getattr(type(provider), method) is not getattr(StartHeadersMiddleware, method)


def fused(layers: Iterable[type]) -> list[object]:
    """Middleware classes, outermost first, with each run of header-only ones fused.

    Returns what Starlette's `add_middleware` takes: a class, or a factory that builds
    the fused layer around the app.
    """
    result: list[object] = []
    run: list[type[StartHeadersMiddleware]] = []

    def flush() -> None:
        if run:
            classes = tuple(run)
            result.append(lambda app: FusedStartHeaders(app, [c(app) for c in classes]))
            run.clear()

    for layer in layers:
        if isinstance(layer, type) and issubclass(layer, StartHeadersMiddleware):
            run.append(layer)
        else:
            flush()
            result.append(layer)
    flush()
    return result
