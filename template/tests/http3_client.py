"""A minimal HTTP/3 client on aioquic's documented API (`aioquic.asyncio.connect`,
`H3Connection`): one GET, with the protocol QUIC's ALPN chose."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ProtocolNegotiated, QuicEvent


@dataclass
class Answer:
    alpn: str | None = None
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class H3Client(QuicConnectionProtocol):
    def __init__(self, quic: QuicConnection, **kwargs: object) -> None:
        super().__init__(quic, **kwargs)  # type: ignore[arg-type]
        self.quic = quic  # the QUIC connection it was made with, kept by name here
        self.answer = Answer()
        self.h3: H3Connection | None = None
        self.done = asyncio.Event()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated):
            self.answer.alpn = event.alpn_protocol
            self.h3 = H3Connection(self.quic)
        if self.h3 is None:
            return
        for h3_event in self.h3.handle_event(event):
            self.h3_event_received(h3_event)

    def h3_event_received(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            headers = {name.decode(): value.decode() for name, value in event.headers}
            self.answer.status = int(headers.pop(":status"))
            self.answer.headers = headers
        elif isinstance(event, DataReceived):
            self.answer.body += event.data
        if getattr(event, "stream_ended", False):
            self.done.set()

    def get(self, host: str, port: int, path: str) -> None:
        assert self.h3 is not None
        stream = self.quic.get_next_available_stream_id()
        self.h3.send_headers(stream, [(b":method", b"GET"), (b":scheme", b"https"),
                                      (b":authority", f"{host}:{port}".encode()),
                                      (b":path", path.encode())], end_stream=True)
        self.transmit()


async def http3_get(host: str, port: int, path: str, ca_file: str,
                    timeout: float = 10.0) -> Answer:
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                      verify_mode=ssl.CERT_REQUIRED)
    configuration.load_verify_locations(cafile=ca_file)
    async with asyncio.timeout(timeout), connect(
            host, port, configuration=configuration, create_protocol=H3Client,
            wait_connected=True) as client:
        assert isinstance(client, H3Client)
        while client.h3 is None:
            await asyncio.sleep(0.01)
        client.get(host, port, path)
        await client.done.wait()
        return client.answer
