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

# Outermost first; create_app puts the access log after the request id, CORS
# (WEBSERVER_CORS_ORIGINS) after AROUND, and your middleware (MIDDLEWARE in
# app/custom.py) between GUARDS and WITHIN:
# - AROUND: the request id and the headers every answer carries, around everything;
# - GUARDS: the Host check, before any code of yours sees a forged Host (a redirect of
#   yours built from request.url would carry it);
# - WITHIN: the template's body limits and 500s, inside yours, so a CORS, GZip or
#   BaseHTTPMiddleware of yours gets them as it gets your routes' answers, and a
#   refusal raised while a route reads the body is answered before it could cross a
#   middleware of yours.
AROUND = (RequestIdMiddleware, TimingMiddleware, SecurityHeadersMiddleware)
GUARDS = (AllowedHostsMiddleware,)
WITHIN = (ServerErrorMiddleware, RequestLimitsMiddleware, WebSocketLimitsMiddleware)
MIDDLEWARE = (*AROUND, *GUARDS, *WITHIN)
