"""Base for middleware that only adds headers to the response start.

Such middleware compose: `fused()` runs consecutive ones as a single ASGI layer (one
`send` wrapper, one header merge per response instead of one per middleware), which
is most of what the template's own middleware used to cost (docs/benchmarks.md).
Each class still works alone, and is tested alone, as plain ASGI middleware.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from app.middleware.messages import Message, add_headers

Headers = list[tuple[bytes, bytes]]


class StartHeadersMiddleware(abc.ABC):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @abc.abstractmethod
    def response_headers(self, scope: Scope) -> Headers:
        """Headers for this request's response, decided when the request arrives (may
        also record things in scope)."""

    def headers_at_start(self, scope: Scope) -> Headers:
        """Headers decided when the response starts (a duration, for one)."""
        return []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await FusedStartHeaders(self.app, (self,))(scope, receive, send)


class FusedStartHeaders:
    """Several StartHeadersMiddleware as one ASGI layer, outermost first."""

    def __init__(self, app: ASGIApp, providers: Sequence[StartHeadersMiddleware] = ()) -> None:
        self.app = app
        self.providers = tuple(providers)
        default = StartHeadersMiddleware.headers_at_start
        self.late = tuple(p for p in self.providers if type(p).headers_at_start is not default)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: Headers = []
        for provider in self.providers:
            headers += provider.response_headers(scope)
        late = self.late

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = headers
                for provider in late:
                    extra = extra + provider.headers_at_start(scope)
                add_headers(message, extra)
            await send(message)

        await self.app(scope, receive, send_with_headers)


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
