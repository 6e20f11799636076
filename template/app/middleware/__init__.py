"""Pure ASGI middleware (no BaseHTTPMiddleware: it is slower and hides the messages).

granian advertises `http.response.pathsend`: a FileResponse then ends with a
`pathsend` message instead of body chunks. Each middleware here passes both kinds
through, and `tests/test_middleware.py` drives every class in this package both ways.
"""

from app.middleware.request_id import RequestIdMiddleware
from app.middleware.security_headers import SecurityHeadersMiddleware
from app.middleware.timing import TimingMiddleware

# Outermost first.
MIDDLEWARE = (RequestIdMiddleware, TimingMiddleware, SecurityHeadersMiddleware)
