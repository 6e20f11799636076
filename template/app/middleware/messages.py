"""What middleware needs to know about ASGI response messages."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]


def is_response_end(message: Message) -> bool:
    """The last message of an HTTP response: a final body chunk, or a pathsend."""
    if message["type"] == "http.response.pathsend":
        return True
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def add_headers(message: Message, headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Append headers to an `http.response.start`, leaving ones already set alone."""
    present = {name.lower() for name, _ in message.get("headers", [])}
    extra = [(name, value) for name, value in headers if name not in present]
    message["headers"] = [*message.get("headers", []), *extra]
