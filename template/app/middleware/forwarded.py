"""Proxy headers, believed only when they name an address.

uvicorn's ProxyHeadersMiddleware (in front of the app on both engines: see
create_served_app) takes the client from X-Forwarded-For as it is written: from a
trusted proxy, `6.6.6.6 "GET /admin" 200` became `request.client.host`, and the
access log's client. Here a forwarded client that is not an IP address is not
believed: the request keeps its peer's address (the proxy's), as uvicorn itself does
with an empty X-Forwarded-For. A function, not a class: the layer is uvicorn's.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from starlette.types import ASGIApp

# Longer than any address, a scope id included (fe80::1%eth0): not one, and not cached.
LONGEST_ADDRESS = 64


def proxy_headers(app: ASGIApp, trusted_proxies: str) -> ASGIApp:
    """`app` behind uvicorn's proxy headers for these proxies, forwarded clients checked."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    proxied = ProxyHeadersMiddleware(app, trusted_hosts=trusted_proxies)
    trusted = proxied.trusted_hosts
    choose = getattr(trusted, "get_trusted_client_address", None)
    if not callable(choose):  # a uvicorn release moved it: fail here, not silently
        raise RuntimeError("uvicorn's ProxyHeadersMiddleware no longer has "
                           "trusted_hosts.get_trusted_client_address; see app/middleware/"
                           "forwarded.py")

    def address_or_nothing(x_forwarded_for: str) -> tuple[str, int]:
        host, port = choose(x_forwarded_for)
        # An empty host leaves the peer's address in place (uvicorn's own rule).
        return (host, port) if is_address(host) else ("", 0)

    # Runs only for a request from a trusted proxy that carries X-Forwarded-For.
    trusted.get_trusted_client_address = address_or_nothing
    return proxied


def is_address(host: str) -> bool:
    return len(host) <= LONGEST_ADDRESS and _is_address(host)


@lru_cache(maxsize=4096)
def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
