"""Hypercorn's protocols, bounded as the other engines are (docs/security.md, "Hostile
clients").

Hypercorn has no option for any of these, so each worker swaps the classes its
connections are built from (docs/private-names.md). Its WebSocket stream, built by
the HTTP/1.1, HTTP/2 and HTTP/3 protocols:

- a message past WEBSERVER_WS_MAX_MESSAGE_SIZE is refused before its data is kept
  (Hypercorn appended it first), what was kept of it is freed, and over HTTP/1.1 the
  connection is closed after the close (1009), not left to a client that never answers;
- permessage-deflate is never negotiated: Hypercorn inflates without a bound, and a
  cap on the inflated message would be checked only after it (docs/security.md).

Its HTTP/1.1 protocol: `Upgrade: h2c` is ignored (the request served as HTTP/1.1, as
granian and uvicorn do) unless WEBSERVER_H2C_UPGRADE; Hypercorn switched to HTTP/2
even with HTTP/2 off.
"""

from __future__ import annotations

import hypercorn.protocol
from hypercorn.protocol import h2, h3, h11
from hypercorn.protocol.events import StreamClosed
from hypercorn.protocol.ws_stream import FrameTooLargeError, WebsocketBuffer, WSStream
from wsproto.events import CloseConnection, Event, Message
from wsproto.frame_protocol import CloseReason

PROTOCOL_MODULES = (h11, h2, h3)  # each builds `WSStream` by its module's name


class BoundedBuffer(WebsocketBuffer):
    """A message's data, refused before it passes the cap, and freed when refused."""

    def extend(self, event: Message) -> None:
        if self.length + len(event.data) > self.max_length:
            self.clear()
            raise FrameTooLargeError()
        super().extend(event)


class BoundedWebSocket(WSStream):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.buffer = BoundedBuffer(self.buffer.max_length)

    async def _accept(self, message: dict) -> None:  # type: ignore[override]
        self.handshake.extensions = None  # no permessage-deflate, whatever is offered
        await super()._accept(message)  # type: ignore[arg-type]

    async def _send_wsproto_event(self, event: Event) -> None:
        await super()._send_wsproto_event(event)
        if (isinstance(event, CloseConnection) and event.code == CloseReason.MESSAGE_TOO_BIG
                and self.scope["http_version"] == "1.1"):
            # The rest of the message would be read into wsproto's buffer: close the
            # connection. Over HTTP/2 and /3 it is shared: each message over the cap is
            # freed as it comes, and the client ends the stream.
            await self.send(StreamClosed(stream_id=self.stream_id))


class NoH2CUpgrade(h11.H11Protocol):
    async def _check_protocol(self, event: object) -> None:
        for name, value in event.headers:  # type: ignore[attr-defined]
            if name.lower() == b"upgrade" and value.strip().lower() == b"h2c":
                return
        await super()._check_protocol(event)  # type: ignore[arg-type]


def bound_protocols(*, h2c_upgrade: bool) -> None:
    """Have this worker's connections built from the bounded classes."""
    for module in PROTOCOL_MODULES:
        module.WSStream = BoundedWebSocket  # type: ignore[attr-defined, misc]
    if not h2c_upgrade:
        hypercorn.protocol.H11Protocol = NoH2CUpgrade  # type: ignore[misc]
