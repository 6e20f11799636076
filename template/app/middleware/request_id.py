"""Give every request an id: the caller's X-Request-ID when sane, else a new one."""

from __future__ import annotations

import re
import uuid

from starlette.types import Scope

from app.middleware.start_headers import StartHeadersMiddleware

HEADER = b"x-request-id"
ACCEPTED = re.compile(rb"[A-Za-z0-9._-]{1,128}")


class RequestIdMiddleware(StartHeadersMiddleware):
    def response_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        given = dict(scope["headers"]).get(HEADER, b"")
        request_id = given if ACCEPTED.fullmatch(given) else uuid.uuid4().hex.encode()
        scope.setdefault("state", {})["request_id"] = request_id.decode()
        return [(HEADER, request_id)]
