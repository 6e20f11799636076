"""GET /metrics on the app's port (WEBSERVER_METRICS=path), answered before the app,
as the probes are (app/middleware/probes.py): prometheus-client's own ASGI app."""

from __future__ import annotations

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.metrics import METRICS_PATH, asgi_app, write_batches


class MetricsPathMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.metrics = asgi_app()

    def __call__(self, scope: Scope, receive: Receive, send: Send):  # -> an awaitable
        # Not a coroutine of its own: the app's awaitable, one frame less per request.
        if scope["type"] == "http" and scope["path"] == METRICS_PATH:
            write_batches()  # this worker's own requests, up to this one
            return self.metrics(scope, receive, send)
        return self.app(scope, receive, send)
