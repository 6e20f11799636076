"""What middleware needs to know about ASGI response messages."""

from __future__ import annotations

from collections.abc import Collection, Iterable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]


def is_response_end(message: Message) -> bool:
    """The last message of an HTTP response: a final body chunk, or a pathsend."""
    if message["type"] == "http.response.pathsend":
        return True
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def add_headers(message: Message, headers: Iterable[tuple[bytes, bytes]],
                names: Collection[bytes] | None = None) -> None:
    """Append headers to an `http.response.start`, leaving ones already set alone."""
    existing = message.get("headers") or []
    # `names` (lowercase, as Starlette sends them) can be worked out once by the
    # caller: this runs on every response.
    ours = names if names is not None else {name for name, _ in headers}
    for name, _ in existing:
        if name in ours:  # rare: the app set one of them itself
            present = {name.lower() for name, _ in existing}
            headers = [header for header in headers if header[0] not in present]
            break
    message["headers"] = [*existing, *headers]
