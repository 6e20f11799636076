"""The one HTTP/1.1 response reader (bench/http1.py) that the load driver and the tests
use: every framing, fed whole, byte by byte, and cut short."""

from __future__ import annotations

import pytest

from bench.http1 import Response, ResponseError, ResponseReader

LENGTH = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;name=value\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n")
UNTIL_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end"


def byte_by_byte(reader: ResponseReader, data: bytes) -> list[Response]:
    return [response for i in range(len(data)) for response in reader.feed(data[i : i + 1])]


@pytest.mark.parametrize(("data", "body"), [(LENGTH, b"hello"), (CHUNKED, b"hello, world")],
                         ids=["content-length", "chunked"])
def test_a_body_is_read_whole_however_the_bytes_arrive(data: bytes, body: bytes) -> None:
    for responses in (ResponseReader().feed(data), byte_by_byte(ResponseReader(), data)):
        assert [(r.status, r.body, r.closes) for r in responses] == [(200, body, False)]


def test_responses_one_after_another_on_a_connection() -> None:
    reader = ResponseReader()
    responses = reader.feed(LENGTH + CHUNKED + LENGTH[:20])
    assert [r.body for r in responses] == [b"hello", b"hello, world"]
    assert reader.mid_response
    assert [r.body for r in reader.feed(LENGTH[20:])] == [b"hello"]
    assert not reader.mid_response and reader.eof() is None


def test_a_body_without_length_runs_to_the_close() -> None:
    reader = ResponseReader()
    assert byte_by_byte(reader, UNTIL_CLOSE) == []
    response = reader.eof()
    assert response is not None and response.body == b"to the end" and response.closes


@pytest.mark.parametrize(("data", "method"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD"),
    (b"HTTP/1.1 204 No Content\r\n\r\n", "GET"),
    (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "GET"),
])
def test_responses_that_have_no_body(data: bytes, method: str) -> None:
    responses = ResponseReader(method).feed(data)
    assert len(responses) == 1 and responses[0].body == b""


def test_an_interim_response_is_skipped() -> None:
    responses = ResponseReader().feed(b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH)
    assert [r.status for r in responses] == [200]


@pytest.mark.parametrize(("head", "closes"), [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", False),
])
def test_the_server_says_when_it_closes(head: bytes, closes: bool) -> None:
    assert ResponseReader().feed(head)[0].closes is closes


def test_a_connection_cut_mid_response_is_an_error() -> None:
    for partial in (LENGTH[:10], LENGTH[:-1], CHUNKED[:60]):
        reader = ResponseReader()
        assert reader.feed(partial) == []
        with pytest.raises(ResponseError, match="middle of a response"):
            reader.eof()
    with pytest.raises(ResponseError, match="closed before a response"):
        ResponseReader().take(b"")


@pytest.mark.parametrize("data", [
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\n",
])
def test_what_is_not_a_response_is_refused(data: bytes) -> None:
    with pytest.raises(ResponseError):
        ResponseReader().feed(data)


def test_take_gives_the_first_whole_response() -> None:
    reader = ResponseReader()
    assert reader.take(CHUNKED[:30]) is None
    response = reader.take(CHUNKED[30:])
    assert response is not None and response.body == b"hello, world"
    assert response.header("transfer-encoding") == "chunked"
