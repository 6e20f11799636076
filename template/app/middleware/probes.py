"""/livez and /readyz, answered by the app's first layer (app/middleware/__init__.py).

An orchestrator probes every few seconds per pod; these answers cost neither routing,
metrics nor an access log line. A worker that answers them has a running event loop;
once the engine stops accepting (SIGTERM), the probes fail with the rest. A probe names
the pod's IP as its host: answered here, it never meets WEBSERVER_ALLOWED_HOSTS
(app/middleware/allowed_hosts.py). With a database, /readyz is 503 while it does not
answer (app/core/database.py); /livez never asks it.
"""

from __future__ import annotations

from collections.abc import Awaitable

from app.core import database
from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.body_limits import BODY_HEADERS

READINESS = "/readyz"
PROBE_PATHS = frozenset({"/livez", READINESS})
HEADERS = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
START = {"type": "http.response.start", "status": 200, "headers": HEADERS}
# A probe sent with a body is not read: the connection closes after the answer, or an
# engine would read the body by its own framing and serve what follows it.
BODY = {"type": "http.response.body", "body": b"ok"}


class ProbeMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable: no coroutine per request.
        if scope["type"] == "http" and scope["path"] in PROBE_PATHS:
            return answer(send, with_body(scope), scope["path"])
        return self.app(scope, receive, send)


def with_body(scope: Scope) -> bool:
    return any(name in BODY_HEADERS for name, _ in scope["headers"])


NOT_READY = {"type": "http.response.start", "status": 503,
             "headers": [(b"content-type", b"text/plain"), (b"content-length", b"22")]}
NOT_READY_BODY = {"type": "http.response.body", "body": b"database not answering"}


async def answer(send: Send, close: bool = False, path: str = "") -> None:
    if database.ENABLED and path == READINESS and not await database.ready():
        start, body = NOT_READY, NOT_READY_BODY
    else:
        start, body = START, BODY
    if close:
        start = {**start, "headers": [*start["headers"], (b"connection", b"close")]}
    await send(dict(start))
    await send(dict(body))
