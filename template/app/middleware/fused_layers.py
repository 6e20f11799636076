"""The template's own middleware, where the stack puts them next to each other, as one
ASGI layer.

Each layer costs a call, most a coroutine and a `send` wrapper, several a scan of the
request's headers (docs/benchmarks.md). `fuse()` runs each run of neighbours, in the
order of app/middleware/__init__.py, as one layer: for HTTP, one coroutine, one `send`
wrapper and one scan of the headers. A layer of yours, CORS or the span between two of
them ends a run; WebSocket and lifespan scopes go through the classes themselves. Each
class still works, and is tested, alone.
"""

from __future__ import annotations

from asyncio import CancelledError, current_task
from collections.abc import Awaitable, Iterable, Sequence
from time import perf_counter
from typing import Any

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.body_limits import BODY_HEADERS, MULTIPLEXED
from app.core.stopping import OPEN_STREAMS, Open, server_stopping
from app.middleware import ORDER, layers
from app.middleware.access_log import FORMATS, AccessLogMiddleware
from app.middleware.allowed_hosts import AllowedHostsMiddleware, refuse_host
from app.middleware.errors import ServerErrorMiddleware
from app.middleware.forwarded import FORWARDED_HEADERS, ForwardedHeadersMiddleware
from app.middleware.messages import Message, add_headers, is_response_end
from app.middleware.metrics import MetricsMiddleware
from app.middleware.open_streams import (
    OpenStreamsMiddleware,
    closing,
    cut_by_the_stop,
    has_length,
    noted,
)
from app.middleware.probes import PROBE_PATHS, ProbeMiddleware
from app.middleware.probes import answer as answer_probe
from app.middleware.probes import with_body as probe_with_body
from app.middleware.request_id import ACCEPTED, RequestIdMiddleware
from app.middleware.request_id import HEADER as REQUEST_ID
from app.middleware.request_limits import (
    MAX_HEADERS,
    TOO_MANY_HEADERS,
    RequestLimitsMiddleware,
    answer,
)
from app.middleware.security_headers import SecurityHeadersMiddleware
from app.middleware.start_headers import (
    SERVER_TIMING,
    FusedStartHeaders,
    Headers,
    StartHeadersMiddleware,
    fused,
)
from app.middleware.timing import TimingMiddleware
from app.middleware.websocket_limits import WebSocketLimitsMiddleware

# The request headers the one scan below looks at.
NOTED = frozenset({b"host", *BODY_HEADERS, REQUEST_ID, *FORWARDED_HEADERS})

# The classes this layer does the work of, each in its place in ORDER; the others end a
# run (the access log's place is taken by whichever format WEBSERVER_ACCESS_LOG picks).
FUSABLE = (ProbeMiddleware, ForwardedHeadersMiddleware, OpenStreamsMiddleware, MetricsMiddleware,
           RequestIdMiddleware, *FORMATS.values(), TimingMiddleware, SecurityHeadersMiddleware,
           AllowedHostsMiddleware, ServerErrorMiddleware, RequestLimitsMiddleware,
           WebSocketLimitsMiddleware)


def rank(layer: object) -> int | None:
    """The place of a template class in ORDER (exactly that class: a subclass of yours
    may do more), or None."""
    if not any(layer is cls for cls in FUSABLE):
        return None
    return next(place for place, cls in enumerate(ORDER) if cls is layer)


class FusedLayers:
    """A run of the template's middleware classes (outermost first, in ORDER) as one
    layer."""

    def __init__(self, app: ASGIApp, classes: Sequence[type] | None = None) -> None:
        if classes is None:  # the defaults' classes, as the stack would hold them
            classes = [layer for layer in layers() if rank(layer) is not None]  # type: ignore[misc]
        self.app = app
        # The classes themselves, chained, for what is not HTTP (WebSockets, lifespan).
        other = app
        members = []
        for cls in reversed(classes):
            other = cls(other)
            members.append(other)
        self.other: ASGIApp = other
        self.members: tuple[Any, ...] = tuple(reversed(members))

        def member(kind: type) -> Any:
            return next((m for m in self.members if isinstance(m, kind)), None)

        # The paths answered here before anything else: none without the probes.
        self.probe_paths = PROBE_PATHS if member(ProbeMiddleware) is not None else frozenset()
        self.forwarded: ForwardedHeadersMiddleware | None = member(ForwardedHeadersMiddleware)
        # Read once: the root path is the layer's setting, fixed as it is built.
        self.prefixed = self.forwarded is not None and self.forwarded.prefixes_every_request
        self.streams: OpenStreamsMiddleware | None = member(OpenStreamsMiddleware)
        self.metrics: MetricsMiddleware | None = member(MetricsMiddleware)
        self.access: AccessLogMiddleware | None = member(AccessLogMiddleware)
        self.hosts: AllowedHostsMiddleware | None = member(AllowedHostsMiddleware)
        self.errors: ServerErrorMiddleware | None = member(ServerErrorMiddleware)
        # Its own instance around the app: for HTTP the WebSocket limits pass it through.
        self.limits = (RequestLimitsMiddleware(app) if member(RequestLimitsMiddleware)
                       else None)
        self.request_id: RequestIdMiddleware | None = member(RequestIdMiddleware)
        # The header-only layers' part (start_headers.py), the request id's done here.
        headers = self.headers = FusedStartHeaders(app, [
            m for m in self.members
            if isinstance(m, StartHeadersMiddleware) and m is not self.request_id])
        self.static, self.early, self.timed = headers.static, headers.early, headers.timed
        names = headers.names
        if names is not None and self.request_id is not None:
            names = names | set(RequestIdMiddleware.header_names)
        self.names = names
        self.adds = bool(self.static or self.early or self.timed or self.request_id)
        # What this layer runs, for a look at the stack (tests/test_middleware.py).
        self.parts: tuple[Any, ...] = (*self.members, headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.other(scope, receive, send)
            return
        if scope["path"] in self.probe_paths:
            await answer_probe(send, probe_with_body(scope), scope["path"])
            return
        task = None
        if self.streams is not None:
            try:
                task = current_task()
            except RuntimeError:  # no asyncio loop: Hypercorn's trio worker, the classes'
                await self.other(scope, receive, send)
                return
        # The one scan: the Host check's, the body limits', the request id's and the
        # proxy headers'.
        host = given = None
        twice = body = forwarded = False
        headers = scope["headers"]
        for name, value in headers:
            if name not in NOTED:  # most headers: one lookup, not four tests
                continue
            if name == b"host":
                twice = host is not None
                host = value
            elif name in BODY_HEADERS:
                body = True
            elif name == REQUEST_ID and given is None and ACCEPTED.fullmatch(value):
                given = value
            elif name in FORWARDED_HEADERS:
                forwarded = True
        if (forwarded and self.forwarded is not None) or self.prefixed:
            self.forwarded.forward(scope, named=forwarded)  # before the client or path is read
        # Counted in flight from here: every path below ends in the `finally` that
        # counts it out.
        metrics = self.metrics
        started = metrics.begin() if metrics is not None else perf_counter()
        ours = self.static
        if self.request_id is not None:
            ours = [*ours, self.request_id.identified(scope, given)]
        for early in self.early:  # a header-only layer's headers decided now
            ours = [*ours, *early(scope)]
        status = 0  # also: a response started inside the 500s' place, when not 0
        entry: Open | None = None  # a stream's, once its answer begins (open_streams.py)

        def send_out(message: Message) -> Awaitable[None]:
            # Few names from outside: each is a cell made per request.
            nonlocal status, entry
            if message["type"] == "http.response.start":
                status = message["status"]
                if self.timed:
                    self.add(message, ours, started)
                elif self.adds:
                    add_headers(message, ours, self.names)
                if task is not None:  # OpenStreamsMiddleware's part
                    if server_stopping.is_set():
                        message = closing(message)
                    if not has_length(message.get("headers", ())):
                        entry = noted(task, scope)
                return send(message)
            if entry is not None and message["type"] == "http.response.body":
                entry.done = not message.get("more_body", False)
            if self.access is not None and is_response_end(message):
                return logged(send(message), self.access, scope, status, started)
            return send(message)

        try:
            hosts = self.hosts
            if hosts is not None and (twice or (not hosts.any_host and (
                    host is None or not hosts.host_allowed(host)))):
                await refuse_host(send_out)  # outside the 500s' place, as in the stack
                return
            limits = self.limits
            try:
                if limits is None:
                    await self.app(scope, receive, send_out)
                elif len(headers) > MAX_HEADERS:
                    await answer(send_out, TOO_MANY_HEADERS)
                elif body or scope["http_version"] in MULTIPLEXED:  # the limits' own part
                    await limits.with_body(scope, receive, send_out)
                else:
                    await self.app(scope, receive, send_out)
            except Exception as error:
                if self.errors is None:
                    raise
                await self.errors.recover(scope, receive, send_out, error,
                                          started=status != 0)
        except CancelledError:
            streams = self.streams
            if streams is None or task is None or entry is None or not cut_by_the_stop(
                    entry, task):
                raise
            await streams.end(entry, send)  # outside the rest, as the class does
        finally:
            if entry is not None and task is not None:
                OPEN_STREAMS.open.pop(task, None)  # an app of this template inside another
            if metrics is not None:
                metrics.observe(scope, status, started)

    def add(self, message: Message, ours: Headers, started: float) -> None:
        if self.timed:
            elapsed_ms = (perf_counter() - started) * 1000
            ours = [*ours, (SERVER_TIMING, b"app;dur=%.2f" % elapsed_ms)]
        add_headers(message, ours, self.names)


async def logged(sent: Awaitable[None], access: AccessLogMiddleware, scope: Scope,
                 status: int, started: float) -> None:
    """The response's last message sent, then its access line (as AccessLogMiddleware),
    also when the send is cancelled: a worker recycled as it answers stops its tasks,
    and the request the metrics count must have its line too."""
    try:
        await sent
    finally:
        access.write(scope, status, started)


def fuse(layers: Iterable[object]) -> list[object]:
    """The stack's layers, outermost first, with each run of the template's own classes
    in ORDER fused into one layer (header-only runs as start_headers.fused does).

    Returns what Starlette's `add_middleware` takes: a class, or a factory that builds
    the fused layer around the app.
    """
    result: list[object] = []
    run: list[type] = []

    def flush() -> None:
        if len(run) > 1 and not all(issubclass(c, StartHeadersMiddleware) for c in run):
            classes = tuple(run)
            result.append(lambda app: FusedLayers(app, classes))
        else:
            result.extend(fused(run))
        run.clear()

    last = -1
    for layer in layers:
        place = rank(layer)
        if place is None or place <= last:
            flush()
            last = -1
        if place is None:
            result.append(layer)
        else:
            run.append(layer)  # type: ignore[arg-type]
            last = place
    flush()
    return result

