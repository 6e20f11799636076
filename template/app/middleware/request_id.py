"""Give every request an id: the caller's X-Request-ID when sane, else a new one."""

from __future__ import annotations

import random
import re

from app.core.asgi import Scope
from app.core.logs import REQUEST_ID
from app.middleware.start_headers import Headers, StartHeadersMiddleware

HEADER = b"x-request-id"
ACCEPTED = re.compile(rb"[A-Za-z0-9._-]{1,128}")


class RequestIdMiddleware(StartHeadersMiddleware):
    header_names = (HEADER,)

    def response_headers(self, scope: Scope) -> Headers:
        for name, value in scope["headers"]:
            if name == HEADER and ACCEPTED.fullmatch(value):
                return [self.identified(scope, value)]
        return [self.identified(scope, None)]

    def identified(self, scope: Scope, given: bytes | None) -> tuple[bytes, bytes]:
        """The id: the caller's first sane X-Request-ID (`given`), else a new one; noted
        in scope and in the log records' context; the response's header. (Also called
        by the fused layer, app/middleware/fused_layers.py.)"""
        # 128 random bits as hex, like uuid4().hex, without a system call per request
        # (random reseeds itself in forked workers). An id correlates log lines; it is
        # not a secret.
        request_id = (given.decode() if given is not None
                      else random.getrandbits(128).to_bytes(16).hex())
        state = scope.get("state")
        if state is None:  # not setdefault: its {} would be made for every request
            state = scope["state"] = {}
        state["request_id"] = request_id
        REQUEST_ID.set(request_id)  # for the log records of this request (its own task)
        return (HEADER, request_id.encode())
