"""A server span per HTTP request, when OpenTelemetry traces are on (app/core/tracing.py).

Added only when the environment asks for traces. The span continues the caller's trace
(the configured propagators), is named `METHOD /route/{template}` once the router has
chosen (the method alone when nothing matched), carries the stable HTTP attributes (no
query string: it often holds tokens), and is an error for a 5xx or an exception. The
response carries its `traceparent`; your spans are its children, and its trace id goes
to the access log and the log records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.core import tracing
from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.logs import TRACE_ID
from app.core.metrics import METHODS
from app.middleware.messages import Message, add_headers

TRACEPARENT = b"traceparent"
TRACESTATE = b"tracestate"
OTHER_METHOD = "_OTHER"  # the semantic conventions' word for a method they do not know


class _ScopeHeaders:
    """What OpenTelemetry's propagators read a carrier with: the ASGI header list."""

    def get(self, carrier: Iterable[tuple[bytes, bytes]], key: str) -> list[str] | None:
        wanted = key.lower().encode("latin-1")
        found = [value.decode("latin-1") for name, value in carrier if name == wanted]
        return found or None

    def keys(self, carrier: Iterable[tuple[bytes, bytes]]) -> list[str]:
        return [name.decode("latin-1") for name, _ in carrier]


class TracingMiddleware:
    def __init__(self, app: ASGIApp, provider: Any = None) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.app = app
        self.provider = provider or tracing.provider()
        self.tracer = self.provider.get_tracer("app.middleware.tracing")
        self.context, self.propagate, self.trace = context, propagate, trace
        self.response_propagator = TraceContextTextMapPropagator()
        self.getter = _ScopeHeaders()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._flushing(receive), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trace = self.trace
        method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
        attributes: dict[str, Any] = {
            "http.request.method": method, "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
        }
        if method == OTHER_METHOD:
            attributes["http.request.method_original"] = scope["method"]
        if client := scope.get("client"):
            attributes["client.address"] = client[0]
        parent = self.propagate.extract(scope["headers"], getter=self.getter)  # type: ignore[arg-type]
        name = method if method != OTHER_METHOD else "HTTP"
        span = self.tracer.start_span(name, context=parent, kind=trace.SpanKind.SERVER,
                                      attributes=attributes)
        current = trace.set_span_in_context(span, parent)
        token = self.context.attach(current)
        trace_id = format(span.get_span_context().trace_id, "032x")
        scope.setdefault("state", {})["trace_id"] = trace_id
        TRACE_ID.set(trace_id)
        carrier: dict[str, str] = {}
        self.response_propagator.inject(carrier, context=current)
        ours = [(key.encode("latin-1"), value.encode("latin-1"))
                for key, value in carrier.items()]
        status = 0

        async def send_traced(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                add_headers(message, ours)
            await send(message)

        error_type = None
        try:
            await self.app(scope, receive, send_traced)
        except BaseException as error:
            span.record_exception(error)
            error_type = type(error).__qualname__
            raise
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is not None:
                span.update_name(f"{name} {route}")
                span.set_attribute("http.route", route)
            if status:
                span.set_attribute("http.response.status_code", status)
            if error_type is None and (status >= 500 or not status):
                error_type = str(status) if status else "incomplete"
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(trace.StatusCode.ERROR)
            span.end()
            self.context.detach(token)

    def _flushing(self, receive: Receive) -> Receive:
        """Lifespan messages, with the batched spans sent when the worker stops."""
        async def receive_flushing() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.provider.force_flush()
            return message

        return receive_flushing
