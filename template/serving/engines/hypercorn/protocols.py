"""Hypercorn's protocols, bounded as the other engines are (docs/security.md).

Hypercorn has no option for these, so each worker swaps the classes its connections are
built from (docs/private-names.md). WebSockets, over HTTP/1.1, /2 and /3: a message past
WEBSERVER_WS_MAX_MESSAGE_SIZE is refused before its data is kept, and over HTTP/1.1 the
connection is closed after the close (1009); permessage-deflate is never negotiated, as
Hypercorn inflates without a bound. HTTP/1.1: `Upgrade: h2c` is ignored unless
WEBSERVER_H2C_UPGRADE, as on granian and uvicorn.
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
            # Else the rest would be read into wsproto's buffer. Over HTTP/2 and /3 the
            # connection is shared: each message over the cap is freed as it comes.
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
