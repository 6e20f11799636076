"""X-Forwarded-For, -Proto and -Prefix from trusted proxies, the same on every engine.

X-Forwarded-For is walked from the right, past each trusted proxy, as nginx's realip
module does; the first other entry is the client only if it is an IP address, else the
request keeps its peer's, so `6.6.6.6 "GET /admin" 200` cannot become the client or the
access log's. The prefix (WEBSERVER_ROOT_PATH, or a trusted proxy's X-Forwarded-Prefix,
which wins; plain path segments only) becomes the ASGI `root_path` and is always put in
front of the path, as uvicorn's own `root_path` does: routing takes it off again, and a
client cannot reach a route by naming a prefix.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from app.core.asgi import ASGIApp, Receive, Scope, Send
from app.core.settings import get_settings, is_path_prefix

FORWARDED_HEADERS = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-prefix"})
SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
WEBSOCKET_SCHEMES = {"http": "ws", "https": "wss"}
LONGEST_ADDRESS = 64  # longer than any address, a scope id included (as in fe80::1 on eth0)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=4096)
def address(host: str) -> Address | None:
    if len(host) > LONGEST_ADDRESS:
        return None
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def host_and_port(entry: str) -> tuple[str, int]:
    """`203.0.113.7`, `203.0.113.7:80`, `::1` or `[::1]:80`; anything else is returned
    whole as the host (and is then no address)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    else:
        host, port = entry, ""
    if port and not (port.isascii() and port.isdigit() and len(port) <= 5):
        return entry, 0
    return host, int(port or 0)


class TrustedProxies:
    """WEBSERVER_TRUSTED_PROXIES: `*`, or addresses and networks (settings.py checks it)."""

    def __init__(self, listed: str) -> None:
        entries = [entry.strip() for entry in listed.split(",") if entry.strip()]
        self.everyone = entries == ["*"]
        self.networks = [] if self.everyone else [
            ipaddress.ip_network(entry) for entry in entries]
        self.trusts = lru_cache(maxsize=4096)(self._trusts)

    def _trusts(self, host: str) -> bool:
        if self.everyone:
            return True
        found = address(host)
        return found is not None and any(found in network for network in self.networks)

    def client(self, x_forwarded_for: str) -> tuple[str, int] | None:
        """The forwarded client, or None when the header names no address to believe."""
        entries = [entry.strip() for entry in x_forwarded_for.split(",") if entry.strip()]
        for entry in reversed(entries):
            host, port = host_and_port(entry)
            if address(host) is None:
                return None
            if not self.trusts(host):
                return host, port
        return host_and_port(entries[0]) if entries else None


class ForwardedHeadersMiddleware:
    """WEBSERVER_TRUSTED_PROXIES and WEBSERVER_ROOT_PATH unless given."""

    def __init__(self, app: ASGIApp, trusted_proxies: str | None = None,
                 root_path: str | None = None) -> None:
        self.app = app
        if trusted_proxies is None:
            trusted_proxies = get_settings().trusted_proxies
        if root_path is None:
            root_path = get_settings().root_path
        self.trusted = TrustedProxies(trusted_proxies)
        self.root_path = root_path

    def __call__(self, scope: Scope, receive: Receive, send: Send):  # -> the app's awaitable
        if scope["type"] in ("http", "websocket"):
            self.forward(scope)
        return self.app(scope, receive, send)

    @property
    def prefixes_every_request(self) -> bool:
        """Whether `forward` changes a request that sent none of FORWARDED_HEADERS (a
        fused layer that saw none skips the call otherwise: fused_layers.py)."""
        return bool(self.root_path)

    def forward(self, scope: Scope, named: bool = True) -> None:
        """The scope as forwarded (an HTTP or WebSocket one). `named`: whether a header
        of FORWARDED_HEADERS may be there (the fused layer, app/middleware/
        fused_layers.py, knows from its one scan of the headers)."""
        peer = scope.get("client")
        prefix = self.root_path
        if named and peer and self.trusted.trusts(peer[0]):
            prefix = self.apply(scope) or prefix
        if prefix:
            with_prefix(scope, prefix)

    def apply(self, scope: Scope) -> str | None:
        """Believe the forwarded headers; the forwarded prefix, if any."""
        proto = forwarded_for = prefix = None
        for name, value in scope["headers"]:
            if name == b"x-forwarded-proto":
                proto = value
            elif name == b"x-forwarded-for":
                forwarded_for = value if forwarded_for is None else forwarded_for + b"," + value
            elif name == b"x-forwarded-prefix":
                prefix = value  # the last line: the nearest proxy's
        if proto is not None:
            scheme = SCHEMES.get(proto.decode("latin-1").strip().lower())
            if scheme is not None:
                websocket = scope["type"] == "websocket"
                scope["scheme"] = WEBSOCKET_SCHEMES[scheme] if websocket else scheme
        if forwarded_for is not None:
            client = self.trusted.client(forwarded_for.decode("latin-1"))
            if client is not None:
                scope["client"] = client
        if prefix is not None:
            text = prefix.decode("latin-1").rpartition(",")[2].strip().rstrip("/")
            return text if is_path_prefix(text) else None
        return None


def with_prefix(scope: Scope, prefix: str) -> None:
    scope["root_path"] = prefix
    scope["path"] = prefix + scope["path"]
    raw = scope.get("raw_path")
    if raw is not None:
        scope["raw_path"] = prefix.encode("latin-1") + raw
