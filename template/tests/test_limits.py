"""What a client may send, and for how long, the same on every engine (docs/security.md,
"Limits" and "Timeouts"). Each attack goes to a real server of each engine, over raw
sockets where the input is malformed or slow; every connection is to 127.0.0.1, and
each load is bounded in count and time.

Two servers per engine: one with the defaults (sizes, header count, malformed bodies,
memory, slow clients with no cap), one with short timeouts and a concurrency cap (slow
clients against the cap, WebSocket idle timeout and cap), so that no test waits long.
The tests at the end drive the middleware in-process: what a body's time counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from app.core import loops
from app.core.setting_specs import BY_NAME
from app.middleware.body_budget import BodyBudget
from app.middleware.request_limits import MAX_HEADERS, RequestLimitsMiddleware
from tests import served
from tests.server_process import FULL_DETAIL, answering_worker, running_server

slow = pytest.mark.slow  # the tests that boot servers; the in-process ones at the end are not

MAX_HEADER_SIZE = BY_NAME["max_header_size"].default
MAX_BODY_SIZE = BY_NAME["max_body_size"].default
HEADER_TIMEOUT = BY_NAME["header_timeout"].default
# The capped server: timeouts of seconds, a cap the slow clients outnumber.
SHORT_TIMEOUT = 2
CAP = 20
WS_CAP = 3
# granian times an idle connection and a head with one timer: keep-alive as short too.
SHORT = ["--header-timeout", str(SHORT_TIMEOUT), "--keepalive-timeout", str(SHORT_TIMEOUT),
         "--body-timeout", str(SHORT_TIMEOUT), "--ws-idle-timeout", "1",
         "--ws-max-connections", str(WS_CAP)]


def capping(engine: str) -> list[str]:
    """The concurrency cap, where the engine has one (gunicorn's asgi worker has none)."""
    honoured = engine in loops.FEATURES["max_concurrency"].honoured_by
    return ["--max-concurrency", str(CAP)] if honoured else []


@dataclass
class Served:
    engine: str
    url: str
    port: int
    pid: int  # the worker's
    output: Callable[[], str]  # the server's log so far


@contextlib.contextmanager
def serving(engine: str, args: list[str]) -> Iterator[Served]:
    with running_server(["--engine", engine, *args], env=FULL_DETAIL) as server:
        pid = answering_worker(server)
        yield Served(engine, server.url, int(server.url.rsplit(":", 1)[1]), pid,
                     server.output)


@pytest.fixture(scope="module", params=served.ENGINES)
def defaults(request: pytest.FixtureRequest) -> Iterator[Served]:
    with serving(request.param, []) as served:
        yield served


@pytest.fixture(scope="module", params=served.ENGINES)
def capped(request: pytest.FixtureRequest) -> Iterator[Served]:
    with serving(request.param, SHORT + capping(request.param)) as served:
        yield served


# -- raw HTTP -------------------------------------------------------------------------

def head(path: str = "/health/", *lines: bytes, method: bytes = b"GET") -> bytes:
    return b"%s %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (
        method, path.encode(), b"".join(line + b"\r\n" for line in lines))


def exchange(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Send, then read until the server closes (or resets); what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(ConnectionError):
            sock.sendall(data)
        return read_all(sock)


def read_all(sock: socket.socket) -> bytes:
    received = b""
    with contextlib.suppress(ConnectionError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def status(response: bytes) -> int | None:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    return int(match[1]) if match else None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def memory_kib(pid: int, field: str) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith(f"{field}:"))
    return int(line.split()[1])


# -- header count and size ------------------------------------------------------------

@slow
def test_more_than_100_headers_get_431(defaults: Served) -> None:
    def with_headers(count: int) -> int | None:
        extra = [b"x-h%d: a" % number for number in range(count - 2)]  # Host, Connection
        return status(exchange(defaults.port, head("/health/", b"Connection: close", *extra)))

    assert (with_headers(MAX_HEADERS), with_headers(MAX_HEADERS + 1)) == (200, 431)


def head_of(size: int, *lines: bytes) -> bytes:
    """A request head of `size` bytes, in lines of 4 KiB (gunicorn also limits each line)."""
    lines = lines or (b"Connection: close",)
    while (short := size - len(head("/health/", *lines))) > 0:
        name = b"x-%d: " % len(lines)
        lines = (*lines, name + b"a" * max(min(4096, short - 2) - len(name), 0))
    return head("/health/", *lines)


@slow
def test_a_head_over_the_size_limit_gets_431(defaults: Served) -> None:
    """The head as a whole, in lines of 4 KiB."""
    assert status(exchange(defaults.port, head_of(MAX_HEADER_SIZE))) == 200
    assert status(exchange(defaults.port, head_of(MAX_HEADER_SIZE + 1024))) == 431


@slow
def test_a_later_head_on_a_kept_alive_connection_is_limited_as_the_first(
        defaults: Served) -> None:
    """Each request of a connection starts the head's count again (at the end of the
    message before it): its second head gets 431 past the limit, as its first would."""
    with socket.create_connection(("127.0.0.1", defaults.port), timeout=10) as sock:
        sock.sendall(head("/health/"))
        answered = b""
        while not (match := re.search(rb"(?is)content-length: (\d+).*?\r\n\r\n", answered)) \
                or len(answered) < match.end() + int(match[1]):
            answered += sock.recv(65536)
        assert status(answered) == 200
        with contextlib.suppress(ConnectionError):
            sock.sendall(head_of(MAX_HEADER_SIZE + 1024, b"X-Second: 1"))
        assert status(read_all(sock)) == 431


@slow
def test_a_64_mib_header_is_refused_without_reading_it(defaults: Served) -> None:
    """uvicorn with httptools read a 200 MB header (a minute of CPU); 64 MiB took ~5 s."""
    before = cpu_seconds(defaults.pid)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", defaults.port), timeout=30) as sock:
        sent = 0
        with contextlib.suppress(ConnectionError):
            sock.sendall(b"GET /health/ HTTP/1.1\r\nHost: localhost\r\nx-big: ")
            chunk = b"a" * 1024 * 1024
            while sent < 64 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.sendall(b"\r\n\r\n")
        answer = read_all(sock)
    seconds, cpu = time.monotonic() - started, cpu_seconds(defaults.pid) - before
    print(f"{defaults.engine}: {sent >> 20} MiB sent, {answer[:40]!r}, {seconds:.2f} s, "
          f"{cpu:.2f} s CPU")
    assert status(answer) in (431, None)  # None: reset while the client was still sending
    assert sent < 64 * 1024 * 1024 or status(answer) == 431
    assert cpu < 0.5 and seconds < 5


# -- bodies ---------------------------------------------------------------------------

@pytest.mark.demo_routes
@slow
def test_an_announced_body_over_the_limit_gets_413_before_it_is_sent(
        defaults: Served) -> None:
    with socket.create_connection(("127.0.0.1", defaults.port), timeout=10) as sock:
        sock.sendall(head("/demo/echo", b"Content-Length: %d" % (1 << 30), method=b"POST"))
        answer = read_all(sock)  # not a byte of the body sent: the server closes
    assert status(answer) == 413, answer[:200]
    assert b"connection: close" in answer.lower()
    assert answer.endswith(b'{"detail":"Content Too Large"}')


def send_chunked(port: int, total: int, chunk: int = 65536) -> tuple[bytes, int]:
    """A chunked POST of `total` bytes (sent until the server stops reading); the answer
    and how much was sent."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with contextlib.suppress(ConnectionError):
            sock.sendall(head("/demo/echo", b"Transfer-Encoding: chunked", b"Connection: close",
                              method=b"POST"))
            piece = b"%x\r\n%s\r\n" % (chunk, b"a" * chunk)
            while sent < total:
                sock.sendall(piece)
                sent += chunk
            sock.sendall(b"0\r\n\r\n")
        return read_all(sock), sent


@pytest.mark.demo_routes
@slow
def test_a_chunked_body_over_the_limit_gets_413(defaults: Served) -> None:
    answer, sent = send_chunked(defaults.port, 64 << 20)
    print(f"{defaults.engine}: 413 after {sent >> 10} KiB sent")
    assert status(answer) == 413, answer[:200]
    assert sent < 16 << 20  # the server stopped reading near the limit
    under, _ = send_chunked(defaults.port, MAX_BODY_SIZE)
    assert status(under) == 200 and under.endswith(b'{"received_bytes":%d}' % MAX_BODY_SIZE)


@pytest.mark.demo_routes
@slow
def test_memory_stays_bounded_under_64_mib_uploads(defaults: Served) -> None:
    """Peak RSS of the worker (VmHWM, reset first) over a 64 MiB upload, announced and
    chunked (held whole, a 1 GiB body would take 2.16 GB)."""
    pid = defaults.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM back to the current RSS
    before = memory_kib(pid, "VmRSS")
    for attempt in ("announced", "chunked"):
        if attempt == "announced":
            with socket.create_connection(("127.0.0.1", defaults.port), timeout=10) as sock:
                with contextlib.suppress(ConnectionError):
                    sock.sendall(head("/demo/echo", b"Content-Length: %d" % (64 << 20),
                                      method=b"POST"))
                    for _ in range(64):
                        sock.sendall(b"a" * (1 << 20))
                answer = read_all(sock)
        else:
            answer, _ = send_chunked(defaults.port, 64 << 20)
        assert status(answer) == 413, (attempt, answer[:200])
    grown = memory_kib(pid, "VmHWM") - before
    print(f"{defaults.engine}: peak RSS grew {grown} KiB over two 64 MiB uploads")
    assert grown < 16 * 1024


MALFORMED_CHUNKED = {
    "size overflow": b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
    "size not hex": b"zz\r\nabc\r\n0\r\n\r\n",
    "negative size": b"-3\r\nabc\r\n0\r\n\r\n",
    "data longer than its size": b"3\r\nabcdef\r\n0\r\n\r\n",
    "no CRLF after the data": b"3\r\nabcXX0\r\n\r\n",
}


# gunicorn's Python parser and Hypercorn's h11 take a chunk size of 2**80 and wait for
# the bytes: the body timeout (2 s on the capped server) answers it.
MALFORMED_EXCEPT = {("gunicorn", "size overflow"): 408, ("hypercorn", "size overflow"): 408}


@pytest.mark.demo_routes
@slow
def test_a_malformed_chunked_body_gets_a_4xx(capped: Served) -> None:
    """400 (granian answered 500 with a traceback; uvicorn and gunicorn 400 themselves)."""
    statuses = {
        name: status(exchange(capped.port, head(
            "/demo/echo", b"Transfer-Encoding: chunked", b"Connection: close",
            method=b"POST") + body))
        for name, body in MALFORMED_CHUNKED.items()}
    assert statuses == {name: MALFORMED_EXCEPT.get((capped.engine, name), 400)
                        for name in MALFORMED_CHUNKED}
    assert "Traceback" not in capped.output()


# -- slow clients ---------------------------------------------------------------------

async def trickle(port: int, at_once: bytes, data: bytes, pause: float,
                  seconds: float) -> tuple[float, bytes]:
    """Send `at_once`, then `data` a byte every `pause` seconds; when the server closed
    the connection (from its start) and what it answered, or (inf, what it answered) if
    it was still open after `seconds`."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = b""
    try:
        writer.write(at_once)
        for byte in (data[i:i + 1] for i in range(len(data))):
            writer.write(byte)
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                answer += await asyncio.wait_for(reader.read(65536), pause)
                if reader.at_eof():
                    return time.monotonic() - started, answer
            if time.monotonic() - started > seconds:
                return float("inf"), answer
    except ConnectionError:
        return time.monotonic() - started, answer
    finally:
        writer.close()
    return float("inf"), answer


SLOW_HEAD = (b"", head("/health/", *[b"x-slow-%d: aaaaaaaaaa" % n for n in range(20)]))
SLOW_BODY = (head("/demo/echo", b"Content-Length: 1000", method=b"POST"), b"a" * 1000)


async def slowloris(port: int, heads: int, bodies: int, seconds: float, url: str) -> dict:
    """Slow bodies, then slow heads, at a byte per 0.5 s for up to `seconds`, and a
    normal request every 0.2 s meanwhile: when each slow one was closed, and when each
    normal request was answered, with what."""
    slow = []
    for _ in range(bodies):  # one at a time: each admitted before the next arrives
        slow.append(asyncio.create_task(trickle(port, *SLOW_BODY, 0.5, seconds)))
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    slow += [asyncio.create_task(trickle(port, *SLOW_HEAD, 0.5, seconds))
             for _ in range(heads)]
    await asyncio.sleep(0.3)  # all connected and sending
    started, normal = time.monotonic(), []
    async with httpx.AsyncClient(timeout=1) as client:
        while time.monotonic() - started < seconds and not all(t.done() for t in slow):
            sent = time.monotonic()
            try:
                answer = await client.get(f"{url}/health/", headers={"Connection": "close"})
                normal.append((sent - started, answer.status_code, time.monotonic() - sent))
            except httpx.TransportError as error:
                normal.append((sent - started, type(error).__name__, time.monotonic() - sent))
            await asyncio.sleep(0.2)
    closed = await asyncio.gather(*slow)
    return {"bodies": closed[:bodies], "heads": closed[bodies:], "normal": normal}


@pytest.mark.demo_routes
@slow
def test_slow_clients_with_no_cap_leave_normal_requests_alone(defaults: Served) -> None:
    """The defaults: 50 slow heads are closed at the header timeout; meanwhile every
    normal request is answered within a second."""
    seen = asyncio.run(slowloris(defaults.port, 50, 50, HEADER_TIMEOUT + 1.5, defaults.url))
    normal = seen["normal"]
    print(f"{defaults.engine}: heads closed at {sorted(t for t, _ in seen['heads'])[::10]}, "
          f"{len(normal)} normal requests, slowest {max(n[2] for n in normal):.2f} s")
    assert normal and all(answer == 200 and took < 1 for _, answer, took in normal), normal
    assert all(HEADER_TIMEOUT - 1 < closed < HEADER_TIMEOUT + 2 and answer == b""
               for closed, answer in seen["heads"]), seen["heads"]


@pytest.mark.demo_routes
@slow
def test_slow_clients_past_the_cap_lock_nobody_out_for_long(capped: Served) -> None:
    """As many slow bodies as the cap of 20, and 5 slow heads: the slow bodies get 408
    and the slow heads are closed after the timeouts (2 s), and a normal request is
    answered soon after (left to the engines, uvicorn answers every other request 503
    and granian leaves it waiting, for as long as they trickle)."""
    seen = asyncio.run(slowloris(capped.port, 5, CAP, 8, capped.url))
    normal = seen["normal"]
    served = [at for at, answer, _ in normal if answer == 200]
    print(f"{capped.engine}: first 200 at {served[:1]} s; before it: "
          f"{sorted({str(answer) for at, answer, _ in normal if at < served[0]})}")
    assert served and served[0] < SHORT_TIMEOUT + 2, normal
    assert all(answer == 200 for at, answer, _ in normal if at > served[0] + 0.5), normal
    # uvicorn counts the connection of the request it admits: the 20th gets its 503. A
    # second 503 is a refusal at the cap too, not a lock-out (seen once in a full run, 18
    # of 20 got 408; probably a normal request's connection holding a place).
    each = [(round(closed, 2), status(answer)) for closed, answer in seen["bodies"]]
    bodies = [answered for closed, answered in each if closed < SHORT_TIMEOUT + 2]
    assert len(bodies) == CAP and set(bodies) <= {408, 503} and bodies.count(408) >= CAP - 2, (
        f"{capped.engine}: each slow body's (seconds to its close, status): {each}")
    assert all(closed < SHORT_TIMEOUT + 2 and answer == b"" for closed, answer in seen["heads"])


# -- WebSockets -----------------------------------------------------------------------

def ws_url(served: Served) -> str:
    return served.url.replace("http://", "ws://", 1) + "/ws/echo"


@slow
def test_an_idle_websocket_is_closed_and_a_busy_one_is_not(capped: Served) -> None:
    with connect(ws_url(capped), open_timeout=5) as idle, \
            connect(ws_url(capped), open_timeout=5) as busy:
        started = time.monotonic()
        for _ in range(7):  # 2 s of a message every 0.3 s: never idle for 1 s
            busy.send("ping")
            assert busy.recv(timeout=2) == "ping"
            time.sleep(0.3)
        with pytest.raises(ConnectionClosed) as closed:
            idle.recv(timeout=5)
        assert time.monotonic() - started < 5
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


@slow
def test_websockets_past_the_cap_are_refused_alike(capped: Served) -> None:
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(connect(ws_url(capped), open_timeout=5))
                  for _ in range(WS_CAP)]
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url(capped), open_timeout=5)
        # A close before the accept, which every engine answers 403 with no body
        # (app/middleware/websocket_limits.py).
        assert refused.value.response.status_code == 403
        assert refused.value.response.body == b""
        assert "upgrade" not in refused.value.response.headers
        opened[0].close()
        time.sleep(0.3)
        with connect(ws_url(capped), open_timeout=5) as again:  # a place came free
            again.send("x")
            assert again.recv(timeout=2) == "x"


# -- in-process: what the body's time and size are counted on ---------------------------

def limited(app: object, *, limit: int | None = None, timeout: float | None = None,
            budget: BodyBudget | None = None) -> object:
    middleware = RequestLimitsMiddleware(app)
    middleware.max_body, middleware.timeout = limit, timeout
    middleware.budget = budget or BodyBudget(None)
    return middleware


def call(app: object, headers: list[tuple[bytes, bytes]], chunks: list[object],
         http_version: str = "1.1") -> tuple[list[dict], BaseException | None]:
    """Run `app` on a request whose body arrives as `chunks` (bytes; a float: wait that
    long first; None: the client leaves); what it sent and what it raised."""
    scope = {"type": "http", "http_version": http_version, "method": "POST", "path": "/",
             "headers": [(b"host", b"localhost"), *headers]}
    pending = list(chunks)
    sent: list[dict] = []

    async def receive() -> dict:
        while pending and isinstance(pending[0], float):
            await asyncio.sleep(pending.pop(0))
        chunk = pending.pop(0) if pending else None
        if chunk is None:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message: dict) -> None:
        sent.append(message)

    async def run() -> BaseException | None:
        try:
            await app(scope, receive, send)  # type: ignore[operator]
        except Exception as error:
            return error
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        return None

    return sent, asyncio.run(run())


def reader(pause: float = 0.0):
    """An app reading the whole body, `pause` seconds of its own work after each read."""
    async def app(scope: dict, receive: object, send: object) -> None:
        size = 0
        while True:
            message = await receive()  # type: ignore[operator]
            size += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
            await asyncio.sleep(pause)
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"%d" % size})  # type: ignore[operator]
    return app


def test_the_body_time_is_the_clients_not_the_apps() -> None:
    """0.2 s allowed: an app taking 0.15 s after each of 4 reads is not a slow client;
    a client taking 0.3 s for a chunk is."""
    chunked = [(b"transfer-encoding", b"chunked")]
    sent, error = call(limited(reader(0.15), timeout=0.2), chunked, [b"a", b"b", b"c", b"d"])
    assert error is None and sent[-1]["body"] == b"4"
    sent, error = call(limited(reader(), timeout=0.2), chunked, [b"a", 0.3, b"b"])
    assert error is None and sent[0]["status"] == 408


def test_a_body_without_a_length_is_counted() -> None:
    """HTTP/2 may send a body with no Content-Length: its bytes are counted as read."""
    sent, error = call(limited(reader(), limit=10), [], [b"a" * 6, b"a" * 6], "2")
    assert error is None and sent[0]["status"] == 413  # answered by the middleware
    sent, error = call(limited(reader(), limit=12), [], [b"a" * 6, b"a" * 6], "2")
    assert error is None and sent[-1]["body"] == b"12"


def test_an_announced_body_that_stops_short_is_left_to_the_error_layer() -> None:
    """A client that leaves mid-upload gets its 499 from app/middleware/errors.py, not a
    400: only a chunked body's early end can be malformed framing."""
    announced = [(b"content-length", b"100")]
    sent, error = call(limited(reader(), timeout=5), announced, [b"a" * 10, None])
    assert error is None and sent[-1]["body"] == b"10"  # the disconnect reached the app
    sent, error = call(limited(reader(), timeout=5), [(b"transfer-encoding", b"chunked")],
                       [b"a" * 10, None])
    assert error is None and sent[0]["status"] == 400


def test_a_read_past_the_workers_budget_gets_503() -> None:
    """WEBSERVER_BODY_BUDGET: 60 of 100 bytes held by another request; a body whose read
    would pass the budget is refused at that read, one that fits is not, and each gives
    back what it took."""
    budget = BodyBudget(100)
    budget.take(60)  # another request's body, held
    announced = [(b"content-length", b"50")]
    sent, error = call(limited(reader(), budget=budget), announced, [b"a" * 25, b"a" * 25])
    assert error is None and sent[0]["status"] == 503
    assert (b"retry-after", b"1") in sent[0]["headers"]
    assert budget.held == 60
    sent, error = call(limited(reader(), budget=budget), [(b"content-length", b"40")],
                       [b"a" * 40])
    assert error is None and sent[-1]["body"] == b"40"
    assert budget.held == 60


@pytest.mark.parametrize("framing", ["announced", "chunked"])
def test_a_body_alone_is_never_refused_for_the_budget(framing: str) -> None:
    budget = BodyBudget(100)
    headers = ([(b"content-length", b"500")] if framing == "announced"
               else [(b"transfer-encoding", b"chunked")])
    sent, error = call(limited(reader(), budget=budget), headers, [b"a" * 100] * 5)
    assert error is None and sent[-1]["body"] == b"500"
    assert budget.held == 0


def test_a_body_announced_but_not_sent_holds_nothing() -> None:
    """Only bytes read count: a client announcing 1 MiB and sending none cannot fill
    the budget."""
    budget = BodyBudget(100)
    seen: list[int] = []

    async def app(scope: dict, receive: object, send: object) -> None:
        seen.append(budget.held)
        await reader()(scope, receive, send)

    call(limited(app, budget=budget), [(b"content-length", b"1048576")], [b"a" * 10])
    assert seen == [0]


def test_the_budget_is_given_back_when_the_app_fails_or_the_client_is_slow() -> None:
    budget = BodyBudget(100)

    async def failing(scope: dict, receive: object, send: object) -> None:
        await receive()  # type: ignore[operator]
        raise RuntimeError("a route's bug")

    sent, error = call(limited(failing, budget=budget), [(b"content-length", b"20")],
                       [b"a" * 10, b"a" * 10])
    assert isinstance(error, RuntimeError) and budget.held == 0
    sent, error = call(limited(reader(), timeout=0.2, budget=budget),
                       [(b"content-length", b"20")], [b"a" * 10, 0.4, b"a" * 10])
    assert error is None and sent[0]["status"] == 408 and budget.held == 0


def test_a_body_framed_by_length_and_chunked_gets_400_unread() -> None:
    both = [(b"content-length", b"5"), (b"transfer-encoding", b"chunked")]
    sent, error = call(limited(reader()), both, [b"0\r\n\r\n"])
    assert error is None and sent[0]["status"] == 400
    assert (b"connection", b"close") in sent[0]["headers"]


@pytest.mark.parametrize("http_version", ["2", "3"])
def test_a_head_over_the_size_limit_gets_431_over_http2_and_3(http_version: str) -> None:
    large = [(b"x-large", b"a" * MAX_HEADER_SIZE)]
    sent, error = call(limited(reader()), large, [b""], http_version)
    assert error is None and sent[0]["status"] == 431
    sent, error = call(limited(reader()), [(b"x-small", b"a")], [b""], http_version)
    assert error is None and sent[0]["status"] == 200
