"""The request layers: pure ASGI middleware (BaseHTTPMiddleware is slower and hides the
messages), each passing granian's `http.response.pathsend` through (tests/test_middleware.py).

`layers` is the one declaration of their order, outermost first: create_app builds the
stack from it (`middleware_layers`), and the fused layer runs neighbours in it as one.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.framework import CORSMiddleware
from app.core.settings import get_settings
from app.core.tracing import configured as traces_configured
from app.middleware.access_log import FORMATS, access_log_layer
from app.middleware.allowed_hosts import AllowedHostsMiddleware
from app.middleware.cors import cors_layer
from app.middleware.errors import ServerErrorMiddleware
from app.middleware.forwarded import ForwardedHeadersMiddleware
from app.middleware.metrics import MetricsMiddleware
from app.middleware.metrics_path import MetricsPathMiddleware
from app.middleware.open_streams import OpenStreamsMiddleware
from app.middleware.probes import ProbeMiddleware
from app.middleware.request_id import RequestIdMiddleware
from app.middleware.request_limits import BodySizeBeforeYoursMiddleware, RequestLimitsMiddleware
from app.middleware.security_headers import SecurityHeadersMiddleware
from app.middleware.timing import TimingMiddleware
from app.middleware.tracing import TracingMiddleware
from app.middleware.websocket_limits import WebSocketLimitsMiddleware


def layers(*, metrics_path: bool = False, metrics: bool = True, traced: bool = False,
           request_id: bool = True, access_log: Sequence[object] = (),
           server_timing: bool = False, security_headers: bool = True,
           cors: Sequence[object] = (), yours: Sequence[object] = ()) -> tuple[object, ...]:
    """Outermost first. What serving needs before anything else (/metrics on the app's
    port, the probes, the proxy headers, the streams at a stop); the metrics and the
    span, which count and time the rest; the request id and its access line; the
    headers every answer carries; CORS; the Host check, before any code of yours sees
    a forged Host; yours, with a 500 and body limits of their own around them; then the
    template's 500s and body limits, inside yours, so yours get them as they get your
    routes' answers."""
    def on(switch: bool, *classes: object) -> tuple[object, ...]:
        return classes if switch else ()

    return (
        *on(metrics_path, MetricsPathMiddleware),
        ProbeMiddleware, ForwardedHeadersMiddleware, OpenStreamsMiddleware,
        *on(metrics, MetricsMiddleware), *on(traced, TracingMiddleware),
        *on(request_id, RequestIdMiddleware), *access_log,
        *on(server_timing, TimingMiddleware), *on(security_headers, SecurityHeadersMiddleware),
        *cors, AllowedHostsMiddleware,
        *on(bool(yours), ServerErrorMiddleware, BodySizeBeforeYoursMiddleware), *yours,
        ServerErrorMiddleware, RequestLimitsMiddleware, WebSocketLimitsMiddleware)


# Every layer the template may put in, in its place (the fused layer's ranks).
ORDER = layers(metrics_path=True, metrics=True, traced=True, request_id=True,
               access_log=tuple(FORMATS.values()), server_timing=True, security_headers=True,
               cors=(CORSMiddleware,))


def middleware_layers(yours: Sequence[object]) -> tuple[object, ...]:
    """The stack the settings ask for, with `yours` (MIDDLEWARE in app/custom.py)."""
    settings = get_settings()
    return layers(metrics_path=settings.metrics == "path", metrics=settings.metrics != "off",
                  traced=traces_configured(), request_id=settings.request_id,
                  access_log=access_log_layer(), server_timing=settings.server_timing,
                  security_headers=settings.security_headers, cors=cors_layer(), yours=yours)
