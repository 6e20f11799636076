"""One HTTP/1.1 response reader: bodies framed by Content-Length, chunked, or the close.

Sans-I/O: feed it the bytes as they arrive (an asyncio Protocol's `data_received`, a
socket's `recv`, a StreamReader's `read`) and it hands back each whole response; `eof()`
ends a body that runs to the close. The bundled load driver (pydriver.py) and the
project's tests read responses with it. Framing follows RFC 9112 section 6.3: no body
after HEAD or for 1xx, 204 and 304; chunked when Transfer-Encoding ends in chunked;
else Content-Length; else the body runs until the server closes the connection.
Imports nothing but the standard library (the template's own tests load it by path).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ResponseError(ValueError):
    """Bytes that are not an HTTP/1.1 response, or a connection closed mid-response."""


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    closes: bool = False  # the server closes the connection after this response

    def header(self, name: str) -> str | None:
        """The first value of a header, by case-insensitive name."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _UNTIL_CLOSE = range(6)


class ResponseReader:
    """Responses on one connection, one after another, for requests of `method`."""

    def __init__(self, method: str = "GET") -> None:
        self.method = method.upper()
        self._buffer = bytearray()
        self._state = _HEAD
        self._response: Response | None = None
        self._body = bytearray()
        self._remaining = 0

    @property
    def mid_response(self) -> bool:
        """Some bytes of a response arrived and it is not whole yet."""
        return bool(self._buffer) or self._state != _HEAD

    def feed(self, data: bytes) -> list[Response]:
        """Every response these bytes complete, in order."""
        self._buffer += data
        done: list[Response] = []
        while (step := self._step()) is not None:
            if isinstance(step, Response) and step.status >= 200:  # 1xx: more follows
                done.append(step)
        return done

    def take(self, data: bytes) -> Response | None:
        """Bytes as a read returned them, b"" at the close: the response they complete,
        or None for more; ResponseError when the connection closed without one. For a
        connection with one request in flight (a second response would be dropped)."""
        if data:
            done = self.feed(data)
            return done[0] if done else None
        response = self.eof()
        if response is None:
            raise ResponseError("the connection closed before a response")
        return response

    def eof(self) -> Response | None:
        """The connection closed: the response whose body ran to the close, None when
        no response was under way; ResponseError when one was cut short."""
        if self._state == _UNTIL_CLOSE:
            body = bytes(self._buffer)
            self._buffer.clear()
            return self._finish(body)
        if self.mid_response:
            raise ResponseError("the connection closed in the middle of a response")
        return None

    def _finish(self, body: bytes) -> Response:
        response = self._response
        assert response is not None
        response.body = body
        self._response, self._body, self._state = None, bytearray(), _HEAD
        return response

    def _line(self) -> bytes | None:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _step(self) -> Response | bool | None:
        """A whole response, True when a part was read, None when more bytes are needed."""
        buffer = self._buffer
        if self._state == _HEAD:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return None
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            return self._start(head)
        if self._state == _LENGTH:
            if len(buffer) < self._remaining:
                return None
            body = bytes(buffer[: self._remaining])
            del buffer[: self._remaining]
            return self._finish(body)
        if self._state == _CHUNK_SIZE:
            line = self._line()
            if line is None:
                return None
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ResponseError(f"not a chunk size: {line[:40]!r}") from None
            self._state, self._remaining = (_TRAILER, 0) if size == 0 else (_CHUNK_DATA, size)
            return True
        if self._state == _CHUNK_DATA:
            if len(buffer) < self._remaining + 2:
                return None
            if buffer[self._remaining : self._remaining + 2] != b"\r\n":
                raise ResponseError("a chunk does not end with CRLF")
            self._body += buffer[: self._remaining]
            del buffer[: self._remaining + 2]
            self._state = _CHUNK_SIZE
            return True
        if self._state == _TRAILER:
            line = self._line()
            if line is None:
                return None
            return self._finish(bytes(self._body)) if line == b"" else True  # a trailer
        return None  # _UNTIL_CLOSE: only eof() ends it

    def _start(self, head: bytes) -> Response | bool:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ResponseError(f"not a status line: {lines[0][:60]!r}")
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ResponseError(f"not a header line: {line[:60]!r}")
            headers.append((name.strip(), value.strip()))
        response = Response(int(code), headers)
        connection = (response.header("connection") or "").lower()
        response.closes = "close" in connection or (
            version == "HTTP/1.0" and "keep-alive" not in connection)
        self._response = response
        if response.status < 200 or response.status in (204, 304) or self.method == "HEAD":
            return self._finish(b"")
        encoding = (response.header("transfer-encoding") or "").lower()
        length = response.header("content-length")
        if encoding.rsplit(",", 1)[-1].strip() == "chunked":
            self._state = _CHUNK_SIZE
        elif length is not None:
            if not length.isdigit():
                raise ResponseError(f"not a Content-Length: {length[:40]!r}")
            self._state, self._remaining = _LENGTH, int(length)
        else:
            self._state, response.closes = _UNTIL_CLOSE, True
        return True
