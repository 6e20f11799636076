"""The bytes of request bodies one worker holds at once (WEBSERVER_BODY_BUDGET).

A body's own limit bounds one request; this bounds them all together (docs/security.md).
The body limits layer (request_limits.py) takes each read from the budget as it arrives
and gives the request's bytes back when its app call returns; a read that would pass the
budget is refused (503) unless its body is the only one held. One per worker: its
requests all run on its one event loop thread, so the counts need no lock.
"""

from __future__ import annotations


class BodyBudget:
    __slots__ = ("held", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit  # None: counted, never refused
        self.held = 0

    def take(self, size: int, own: int = 0) -> bool:
        """Count `size` more bytes held by a body already holding `own`, unless that
        passes the budget while other bodies hold bytes too."""
        if self.limit is not None and self.held > own and self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size
