"""Hostile clients against a real server of every engine and HTTP parser (docs/security.md,
"Hostile clients"): a request framed two ways (request smuggling), heads too large over
HTTP/2, and many slow bodies at once against the worker's memory. Every connection is
to 127.0.0.1; each load is bounded in count and time.

One server per engine and parser, with HTTP/2 on where the parser carries it, shared by
the module's tests.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core import loops
from app.core.setting_specs import BESIDE_THE_WORKERS_MIB, BY_NAME, memory_limit_mib
from tests import served
from tests.server_process import FULL_DETAIL, answering_worker, running_server
from tests.test_limits import Served, head, memory_kib, status

pytestmark = [pytest.mark.slow, pytest.mark.demo_routes]

MAX_HEADER_SIZE = BY_NAME["max_header_size"].default
MAX_BODY_SIZE = BY_NAME["max_body_size"].default
BODY_BUDGET = BY_NAME["body_budget"].default
WORKERS = 1  # the servers below, as the Deployment's limit is computed for


def servers() -> Iterator[tuple[str, str, bool]]:
    """(engine, parser, HTTP/2 on): each parser an engine takes here, HTTP/2 on where it
    can be (uvicorn: zttp's only)."""
    for engine, spec in loops.ENGINE_SPECS.items():
        if not spec.parser_choice:
            yield engine, loops.AUTO, True
            continue
        for parser in spec.parsers:
            if loops.importable(loops.HTTP_PARSERS[parser].module):
                yield engine, parser, spec.http2_any_parser or loops.HTTP_PARSERS[parser].http2


SERVERS = list(servers())
# The engine's own choice of parser: the one the memory test runs on.
DEFAULT_PARSER = {engine: loops.resolve_http(engine)
                  if loops.ENGINE_SPECS[engine].parser_choice else loops.AUTO
                  for engine in served.ENGINES}


@pytest.fixture(scope="module", params=SERVERS, ids=lambda s: "-".join(s[:2]))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Served, str, bool]]:
    engine, parser, http2 = request.param
    args = ["--engine", engine, "--http", parser, *(["--http2"] if http2 else [])]
    with running_server(args, env=FULL_DETAIL) as server:
        pid = answering_worker(server)
        port = int(server.url.rsplit(":", 1)[1])
        yield Served(engine, server.url, port, int(pid), server.output), parser, http2


def responses_until_closed(port: int, data: bytes, wait: float = 5) -> tuple[bytes, bool]:
    """What the server sent back for `data`, and whether it closed the connection
    within `wait` seconds."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        with contextlib.suppress(ConnectionError):
            sock.sendall(data)
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    return received, True
                received += chunk
        except ConnectionError:
            return received, True
        except TimeoutError:
            pass
    return received, False


# -- a request framed two ways ----------------------------------------------------------

# Transfer-Encoding as each engine might still read it as chunked.
TRANSFER_ENCODINGS = {
    "plain": b"Transfer-Encoding: chunked",
    "upper case": b"Transfer-Encoding: CHUNKED",
    "tab": b"Transfer-Encoding:\tchunked",
    "trailing space": b"Transfer-Encoding: chunked ",
    "obs-fold": b"Transfer-Encoding:\r\n chunked",
    "list": b"Transfer-Encoding: identity, chunked",
}
SMUGGLED = b"GET /demo/items/999 HTTP/1.1\r\nHost: localhost\r\n\r\n"


# Where the request goes: a route, a probe (answered by the app's first layer) and a
# Host the app refuses (before its body limits).
TARGETS = {"route": b"/demo/echo", "probe": b"/livez", "forged host": b"/demo/echo"}


@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("encoding", TRANSFER_ENCODINGS, ids=str)
def test_a_body_with_a_length_and_chunked_gets_no_second_response(
        served: tuple[Served, str, bool], encoding: str, target: str) -> None:
    """RFC 9112 6.1: a request with both may be smuggling one behind it; h11 (uvicorn
    `--http h11`, Hypercorn) read it as chunked and served the bytes after it."""
    server, parser, _ = served
    chunked = b"0\r\n\r\n"
    request = head(TARGETS[target].decode(), b"Content-Length: %d" % len(chunked),
                   TRANSFER_ENCODINGS[encoding], method=b"POST") + chunked
    if target == "forged host":
        request = request.replace(b"Host: localhost", b"Host: evil.example", 1)
    answer, closed = responses_until_closed(server.port, request + SMUGGLED)
    print(f"{server.engine}/{parser} {encoding} to the {target}: {answer[:60]!r}, "
          f"closed: {closed}")
    assert b"item_id" not in answer, answer
    assert len(re.findall(rb"HTTP/1\.[01] \d{3} ", answer)) <= 1, answer
    assert closed, f"the connection stayed open after {answer[:60]!r}"


# -- heads over HTTP/2 ------------------------------------------------------------------

def test_a_head_over_the_size_limit_gets_431_over_http2(
        served: tuple[Served, str, bool]) -> None:
    server, parser, http2 = served
    if not http2:
        pytest.skip(f"{server.engine} with {parser} serves no HTTP/2")
    with httpx.Client(http1=False, http2=True, timeout=10) as client:  # h2c, prior knowledge
        small = client.get(f"{server.url}/health/", headers={"x-small": "a" * 100})
        large = client.get(f"{server.url}/health/",
                           headers={"x-large": "a" * (MAX_HEADER_SIZE + 1024 - 100)})
    assert small.http_version == "HTTP/2" and small.status_code == 200
    assert large.status_code == 431, (large.status_code, large.text[:200])


# -- many slow bodies at once -----------------------------------------------------------

SLOW_CLIENTS = 300
SENT_OF_EACH = 1_000_000  # of a 1 MiB body, then silent
HELD = b"(no answer yet)"


def test_300_slow_bodies_keep_the_worker_under_its_memory_limit(
        served: tuple[Served, str, bool]) -> None:
    """Each client announces a body of the largest size, sends all but the last 48 KiB and
    waits: the worker holds no more than WEBSERVER_BODY_BUDGET of them (v0.22.2 held all
    300, 352-427 MiB), refuses the others with 503 and Retry-After at their first read
    past it, and answers /health/ throughout."""
    server, parser, _ = served
    if parser != DEFAULT_PARSER[server.engine]:
        pytest.skip("once per engine, on its default parser")
    # The worker's share of the Deployment's limit (app/core/setting_specs.py).
    limit_kib = (memory_limit_mib(WORKERS, BODY_BUDGET) - BESIDE_THE_WORKERS_MIB) * 1024
    pid = server.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to the current RSS
    before = memory_kib(pid, "VmRSS")
    body = b"a" * SENT_OF_EACH
    clients: list[socket.socket] = []
    try:
        for _ in range(SLOW_CLIENTS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            clients.append(sock)
            with contextlib.suppress(ConnectionError, TimeoutError):
                sock.sendall(head("/demo/echo", b"Content-Length: %d" % MAX_BODY_SIZE,
                                  method=b"POST") + body)
        health = httpx.get(f"{server.url}/health/", timeout=5).status_code
        peak = memory_kib(pid, "VmHWM")
        # Unanswered for a second: waiting for the rest of its body. (On a loaded machine a
        # refusal can take more than a moment to arrive.)
        answers = [HELD] * len(clients)
        waiting = dict(zip(clients, range(len(clients)), strict=True))
        deadline = time.monotonic() + 1.0
        while waiting and (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select(list(waiting), [], [], left)
            for sock in readable:
                index = waiting.pop(sock)
                try:
                    answers[index] = sock.recv(65536) or b"closed"
                except ConnectionError:
                    answers[index] = b"reset"
    finally:
        for sock in clients:
            sock.close()
    refused = [a for a in answers if status(a) == 503]
    held = answers.count(HELD)
    print(f"{server.engine}: RSS {before >> 10} MiB, peak {peak >> 10} MiB (limit "
          f"{limit_kib >> 10}); {held} held, {len(refused)} refused 503")
    assert peak < limit_kib, f"peak RSS {peak >> 10} MiB"
    assert health == 200
    assert all(re.search(rb"(?i)\r\nretry-after: \d+\r\n", a) for a in refused), refused[:1]
    assert held + len(refused) == SLOW_CLIENTS, {a[:40] for a in answers} - {HELD}
    assert held <= BODY_BUDGET // SENT_OF_EACH + 1  # the last one in holds part of its bytes


# -- WebSocket messages past the cap ----------------------------------------------------

WS_MAX_MESSAGE_SIZE = BY_NAME["ws_max_message_size"].default
IDLE_GROWTH_KIB = 64 << 10  # the bound: within 64 MiB of the idle worker


def upgraded(port: int, *extra: bytes) -> tuple[socket.socket, bytes]:
    """A WebSocket to /ws/echo, offering permessage-deflate; the socket and the head of
    the server's answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head("/ws/echo", b"Upgrade: websocket", b"Connection: Upgrade",
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                      b"Sec-WebSocket-Version: 13", b"Origin: http://localhost", *extra))
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, answer
        answer += chunk
    return sock, answer.split(b"\r\n\r\n", 1)[0]


def frame(payload: bytes, *, compressed: bool = False, final: bool = True) -> bytes:
    """A client's binary frame, masked with a zero key (the payload goes as it is)."""
    first = (0x80 if final else 0) | (0x40 if compressed else 0) | 0x2
    return bytes([first, 0x80 | 127]) + len(payload).to_bytes(8, "big") + bytes(4) + payload


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes the connection within `seconds`, what it sends first
    (a close frame) read and dropped."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return False


def test_websocket_messages_past_the_cap_free_their_memory_and_close(
        served: tuple[Served, str, bool]) -> None:
    """24 messages of 16 MiB sent without reading, then a 64 MiB message of zeros
    deflated to about 64 KB: the worker stays within 64 MiB of its idle size and each
    connection is closed (Hypercorn 0.18 kept every byte, inflated without a bound and
    kept the connection)."""
    server, parser, _ = served
    if parser != DEFAULT_PARSER[server.engine]:
        pytest.skip("once per engine, on its default parser")
    import zlib

    pid = server.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = memory_kib(pid, "VmRSS")
    sock, _ = upgraded(server.port)
    message = frame(b"a" * (16 << 20))
    sent = 0
    with contextlib.suppress(ConnectionError, TimeoutError):
        for _ in range(24):
            sock.sendall(message)
            sent += 1
    closed_plain = closed_within(sock, 5)
    sock.close()
    deflater = zlib.compressobj(wbits=-15)
    bomb = deflater.compress(bytes(64 << 20)) + deflater.flush(zlib.Z_SYNC_FLUSH)[:-4]
    sock, answer = upgraded(server.port, b"Sec-WebSocket-Extensions: permessage-deflate")
    with contextlib.suppress(ConnectionError, TimeoutError):
        sock.sendall(frame(bomb, compressed=True))
    closed_deflated = closed_within(sock, 5)
    sock.close()
    grown = memory_kib(pid, "VmHWM") - before
    print(f"{server.engine}: {sent} of 24 messages sent, then closed: {closed_plain}; "
          f"deflate {b'permessage-deflate' in answer.lower()}, closed: {closed_deflated}; "
          f"peak RSS grew {grown >> 10} MiB")
    assert closed_plain and closed_deflated
    assert grown < IDLE_GROWTH_KIB, f"grew {grown >> 10} MiB"
    assert httpx.get(f"{server.url}/health/", timeout=5).status_code == 200


# -- HTTP/1.1's Upgrade to cleartext HTTP/2 --------------------------------------------

H2C_UPGRADE = (b"Connection: Upgrade, HTTP2-Settings", b"Upgrade: h2c",
               b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")


def test_an_upgrade_to_h2c_is_served_as_http1(served: tuple[Served, str, bool]) -> None:
    """RFC 9113 dropped the Upgrade: a proxy that passes `Upgrade` for WebSockets would
    let a client switch to HTTP/2 behind it, out of the proxy's sight. gunicorn and
    Hypercorn answered 101; it takes WEBSERVER_H2C_UPGRADE now."""
    server, _, _ = served
    answer, _ = responses_until_closed(server.port, head("/health/", *H2C_UPGRADE), wait=1)
    assert status(answer) == 200, answer[:200]


@pytest.mark.parametrize("engine", list(loops.FEATURES["h2c_upgrade"].honoured_by))
def test_an_upgrade_to_h2c_is_taken_when_asked(engine: str) -> None:
    with running_server(["--engine", engine, "--http2", "--h2c-upgrade"]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        answer, _ = responses_until_closed(port, head("/health/", *H2C_UPGRADE), wait=1)
    assert status(answer) == 101, answer[:200]
