"""Base for middleware that only adds headers to the response start.

Such middleware compose: `fused()` runs consecutive ones as a single ASGI layer (one
`send` wrapper, one header merge per response instead of one per middleware), which
is most of what the template's own middleware used to cost (docs/benchmarks.md).
Each class still works alone, and is tested alone, as plain ASGI middleware.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Iterable, Sequence
from time import perf_counter
from typing import ClassVar

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.middleware.messages import Message, add_headers

Headers = list[tuple[bytes, bytes]]
SERVER_TIMING = b"server-timing"


class StartHeadersMiddleware(abc.ABC):  # noqa: B024 - abstract without abstract methods
    """Override either or both of: `static_headers` (the same on every response),
    `response_headers` (decided when the request arrives). The fused layer calls only
    what a class overrides, and measures Server-Timing itself for a class that sets
    `server_timing`. Headers that need more than this (the response's status, its
    body): write plain ASGI middleware instead."""

    static_headers: ClassVar[Headers] = []
    server_timing: ClassVar[bool] = False
    # The names response_headers may add, when known in advance.
    header_names: ClassVar[tuple[bytes, ...] | None] = None

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._alone: FusedStartHeaders | None = None

    def response_headers(self, scope: Scope) -> Headers:
        """Headers for this request's response, decided when the request arrives (may
        also record things in scope)."""
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
        self.providers = tuple(providers)
        # Looked up once, and only what each provider overrides: this runs per request.
        self.static = [header for p in providers for header in p.static_headers]
        self.early = tuple(p.response_headers for p in providers
                           if _overrides(p, "response_headers"))
        self.timed = any(p.server_timing for p in providers)
        dynamic = [p.header_names for p in providers if _overrides(p, "response_headers")]
        self.names = None if None in dynamic else frozenset([
            *(name for name, _ in self.static), *(n for names in dynamic for n in names or ()),
            *([SERVER_TIMING] if self.timed else []),
        ])

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable, and a plain `send` wrapper
        # handing back the engine's: ASGI asks only for awaitables, and this saves a
        # coroutine per request and per message on every request (docs/benchmarks.md).
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        started = perf_counter()
        headers = self.static
        for early in self.early:
            headers = [*headers, *early(scope)]
        timed, names = self.timed, self.names

        def send_with_headers(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                ours = headers
                if timed:
                    elapsed_ms = (perf_counter() - started) * 1000
                    ours = [*ours, (SERVER_TIMING, b"app;dur=%.2f" % elapsed_ms)]
                add_headers(message, ours, names)
            return send(message)

        return self.app(scope, receive, send_with_headers)


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
