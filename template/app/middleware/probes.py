"""/livez and /readyz, answered by the app's first layer (app/middleware/__init__.py).

An orchestrator probes every few seconds per pod; these answers cost neither routing,
metrics nor an access log line. A worker that answers them has a running event loop;
once the engine stops accepting (SIGTERM), the probes fail with the rest. A probe names
the pod's IP as its host: answered here, it never meets WEBSERVER_ALLOWED_HOSTS
(app/middleware/allowed_hosts.py).
"""

from __future__ import annotations

from collections.abc import Awaitable

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.body_limits import BODY_HEADERS

PROBE_PATHS = frozenset({"/livez", "/readyz"})
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
START = {"type": "http.response.start", "status": 200, "headers": HEADERS}
# A probe sent with a body is not read: the connection closes after the answer, or an
# engine would read the body by its own framing and serve what follows it.
CLOSING_START = {**START, "headers": [*HEADERS, (b"connection", b"close")]}
BODY = {"type": "http.response.body", "body": b"ok"}


class ProbeMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable: no coroutine per request.
        if scope["type"] == "http" and scope["path"] in PROBE_PATHS:
            return answer(send, with_body(scope))
        return self.app(scope, receive, send)


def with_body(scope: Scope) -> bool:
    return any(name in BODY_HEADERS for name, _ in scope["headers"])


async def answer(send: Send, close: bool = False) -> None:
    await send(dict(CLOSING_START if close else START))
    await send(dict(BODY))
