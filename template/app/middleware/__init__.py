"""Pure ASGI middleware (no BaseHTTPMiddleware: it is slower and hides the messages).

granian advertises `http.response.pathsend`: a FileResponse then ends with a
`pathsend` message instead of body chunks. Each middleware here passes both kinds
through, and `tests/test_middleware.py` drives every class in this package both ways.
"""

from app.middleware.allowed_hosts import AllowedHostsMiddleware
from app.middleware.errors import ServerErrorMiddleware
from app.middleware.request_id import RequestIdMiddleware
from app.middleware.request_limits import RequestLimitsMiddleware
from app.middleware.security_headers import SecurityHeadersMiddleware
from app.middleware.timing import TimingMiddleware
from app.middleware.websocket_limits import WebSocketLimitsMiddleware

# Outermost first. Refusals (a host not allowed, a request over its limits) and 500s
# are answered inside the request id and the security headers (and the access log,
# which create_app puts after the request id), so they carry both and get their line.
MIDDLEWARE = (RequestIdMiddleware, TimingMiddleware, SecurityHeadersMiddleware,
              AllowedHostsMiddleware, ServerErrorMiddleware, RequestLimitsMiddleware,
              WebSocketLimitsMiddleware)
