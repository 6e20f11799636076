"""Which host a request may name (WEBSERVER_ALLOWED_HOSTS), and which page may open
a WebSocket (WEBSERVER_WS_ORIGINS); docs/security.md.

Starlette builds absolute URLs from the Host header, so a forged one, or a page reached
by DNS rebinding, would put its host in a Location header. A host not allowed, none
(HTTP/1.0), or two Host headers (RFC 9112 says 400) get 400 before any route runs. No
same-origin policy guards a WebSocket: a handshake whose Origin is neither this host's
own (`self`) nor listed gets 403; clients that send no Origin are not checked. The probes
are answered before this layer, whatever host they name (app/middleware/probes.py).
"""

from __future__ import annotations

from collections.abc import Awaitable

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.settings import get_settings
from app.middleware import websocket_limits

ANY = "*"
SELF = "self"
REFUSAL = b"Invalid host header"
CHECKED_MAX = 1024  # distinct Host values remembered; a flood of new ones resets it


def names(setting: str) -> list[str]:
    return [part.strip().lower() for part in setting.split(",") if part.strip()]


def host_name(value: bytes) -> str:
    """The host of a Host header, without the port: `[::1]:8000` is `::1`."""
    text = value.decode("latin-1").lower()
    if text.startswith("["):
        return text[1:text.find("]")]
    return text.partition(":")[0].rstrip(".")


class AllowedHostsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        settings = get_settings()
        hosts = [name.strip("[]").rstrip(".") for name in names(settings.allowed_hosts)]
        self.any_host = ANY in hosts
        self.hosts = frozenset(hosts)
        self.suffixes = tuple(name[1:] for name in hosts if name.startswith("*."))
        origins = [origin.rstrip("/") for origin in names(settings.ws_origins)]
        self.any_origin = ANY in origins
        self.self_origin = SELF in origins
        self.origins = frozenset(origins)
        self.checked: dict[bytes, bool] = {}

    def host_allowed(self, value: bytes) -> bool:
        allowed = self.checked.get(value)
        if allowed is None:
            name = host_name(value)
            allowed = name in self.hosts or name.endswith(self.suffixes)
            if len(self.checked) >= CHECKED_MAX:
                self.checked.clear()
            self.checked[value] = allowed
        return allowed

    def origin_allowed(self, origin: bytes, host: bytes | None) -> bool:
        if self.any_origin:
            return True
        text = origin.decode("latin-1").lower().rstrip("/")
        if text in self.origins:
            return True
        _, _, netloc = text.partition("://")
        return self.self_origin and host is not None and netloc == host.decode("latin-1").lower()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the app's awaitable: no coroutine per request.
        kind = scope["type"]
        if kind == "http":
            host = None
            for name, value in scope["headers"]:
                if name == b"host":
                    if host is not None:  # two Host headers: RFC 9112 says 400
                        return refuse_host(send)
                    host = value
            if not self.any_host and (host is None or not self.host_allowed(host)):
                return refuse_host(send)
        elif kind == "websocket":
            host = origin = None
            for name, value in scope["headers"]:
                if name == b"host":
                    if host is not None:
                        return refuse_websocket(send)
                    host = value
                elif name == b"origin":
                    origin = value
            if (not self.any_host and (host is None or not self.host_allowed(host))) or (
                    origin is not None and not self.origin_allowed(origin, host)):
                return refuse_websocket(send)
        return self.app(scope, receive, send)


async def refuse_host(send: Send) -> None:
    # Closed after: its body, if any, is not read (an engine would frame it and serve
    # what follows), and a client naming a forged host gets no second request.
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(REFUSAL)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": REFUSAL})


def refuse_websocket(send: Send) -> Awaitable[None]:
    return websocket_limits.refuse(send, websocket_limits.POLICY)
