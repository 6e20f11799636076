"""Hypercorn's WebSockets, bounded as on the other engines (docs/security.md, "Hostile
clients").

Hypercorn 0.18 has no option for any of these, so each worker swaps the WebSocket
stream class its HTTP/1.1, HTTP/2 and HTTP/3 protocols build (docs/private-names.md):

- a message past WEBSERVER_WS_MAX_MESSAGE_SIZE is refused before its data is kept
  (Hypercorn appended it first), what was kept of it is freed, and after the close
  (1009) the connection is closed too, not left to a client that never answers;
- permessage-deflate is never negotiated: Hypercorn inflates without a bound (64 KB
  of zeros made 64 MB), and a cap on the inflated message would be checked after it.
"""

from __future__ import annotations

from hypercorn.protocol.events import StreamClosed
from hypercorn.protocol import h2, h3, h11
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
        if isinstance(event, CloseConnection) and event.code == CloseReason.MESSAGE_TOO_BIG:
            # The rest of the message would be read into wsproto's buffer: close.
            await self.send(StreamClosed(stream_id=self.stream_id))


def bound_websockets() -> None:
    """Have this worker's protocols build bounded WebSocket streams."""
    for module in PROTOCOL_MODULES:
        module.WSStream = BoundedWebSocket  # type: ignore[attr-defined, misc]
