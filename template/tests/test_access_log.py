"""Hostile requests to every engine: one access log line each, escaped, in both formats;
a forwarded client believed only when it is an address; a trusted network honoured.

One server per engine and format (module-scoped), each sent every attack. The engines
hand the app the path percent-decoded, so these paths reach the log as newlines,
terminal escapes, quotes and line separators (docs/security.md, "Access log").
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from app.core import loops
from app.core.framework import Request
from app.core.settings import get_settings
from app.middleware.access_log import escaped
from app.middleware.forwarded import ForwardedHeadersMiddleware
from tests import served
from tests.server_process import Server, running_server

PEER = "127.0.0.1"
TRUSTED = "127.0.0.0/8"  # a network: the proxy-headers middleware must match it
# Request targets as a client sends them, percent-encoded.
HOSTILE_PATHS = {
    "newline": "/health/%0a2026-12-01T00:00:00.000+00:00%206.6.6.6%20%22GET%20/admin%22"
               "%20200%201ms%20forged",
    "carriage-return": "/health/%0d%0aforged",
    "terminal-escape": "/health/%1b[31mred%1b[0m%07",
    "quote-backslash": "/health/%22%20%5c%22%5cx41",
    "separators": "/health/%e2%80%a8%c2%85%e2%80%ae%00end",  # U+2028, NEL, RLO, NUL
}
# What a trusted proxy may pass on from a client that wrote its own X-Forwarded-For.
NOT_ADDRESSES = ['6.6.6.7 "GET /admin" 200 0.1ms forged', "unknown", "203.0.113.7:http"]
# What any line about a request holds (the readiness polls write /health/ lines too).
MARKS = ("/health/", "forged", "6.6.6")
TEXT_LINE = re.compile(r'(?P<time>\S+) (?P<client>\S+) "(?P<method>[^"\s]+) (?P<path>[^"]*)" '
                       r"(?P<status>\d{3}) (?P<duration_ms>[\d.]+)ms (?P<request_id>\S+)")
ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def unescaped(text: str) -> str:
    return ESCAPE.sub(lambda match: chr(int(next(g for g in match.groups() if g), 16)), text)


@dataclass
class Served:
    server: Server
    log_format: str
    sent: int = 0

    def get(self, target: str, headers: dict[str, str] | None = None) -> str:
        """Send one request; its request id, the key to its log line."""
        self.sent += 1
        request_id = f"{self.log_format}-{self.sent}"
        host, port = urllib.parse.urlsplit(self.server.url).netloc.split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("GET", target, headers={"X-Request-ID": request_id,
                                                       **(headers or {})})
            connection.getresponse().read()
        finally:
            connection.close()
        return request_id

    def logged(self, request_id: str) -> dict[str, Any]:
        """The fields of the one line the request wrote, once it is there. Every line
        that mentions a request must be a whole access line: a forged line, or the
        fragment a newline leaves, fails here."""
        deadline = time.monotonic() + 5
        while True:
            lines = self.server.output().split("\n")  # only a newline ends a line here
            mentions = [line for line in lines if any(mark in line for mark in MARKS)]
            parsed = [self.fields(line) for line in mentions]
            mine = [fields for fields in parsed if fields and fields["request_id"] == request_id]
            if mine or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert all(parsed), [line for line, fields in zip(mentions, parsed, strict=True)
                             if not fields]
        assert all(line.isprintable() for line in mentions)  # no control, separator, bidi
        assert len(mine) == 1, mentions
        return mine[0]

    def fields(self, line: str) -> dict[str, Any] | None:
        if self.log_format == "json":
            try:
                return json.loads(line)
            except ValueError:
                return None
        match = TEXT_LINE.fullmatch(line)
        return {name: unescaped(value) for name, value in match.groupdict().items()} if (
            match) else None


def loop_for(engine: str) -> str:
    """The project's loop policy where this engine accepts it here, else auto."""
    policy = get_settings().loop
    return policy if loops.refusal(engine, policy, loops.python_version()) is None else "auto"


@pytest.fixture(scope="module", params=[(engine, log_format) for engine in served.ENGINES
                                        for log_format in ("text", "json")],
                ids="-".join)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    engine, log_format = request.param
    env = {"WEBSERVER_ACCESS_LOG": log_format, "WEBSERVER_LOG_LEVEL": "warning",
           "WEBSERVER_TRUSTED_PROXIES": TRUSTED}
    with running_server(["--engine", engine, "--loop", loop_for(engine)], env=env) as server:
        yield Served(server, log_format)


def test_a_hostile_path_makes_one_line_that_reads_back_as_sent(served: Served) -> None:
    for name, target in HOSTILE_PATHS.items():
        request_id = served.get(target)
        fields = served.logged(request_id)
        assert fields["path"] == urllib.parse.unquote(target), name
        assert (fields["method"], fields["client"], str(fields["status"])) == (
            "GET", PEER, "404"), name


def test_a_forwarded_client_that_is_not_an_address_is_not_believed(served: Served) -> None:
    """From a trusted proxy, X-Forwarded-For text that is not an address is not made
    request.client nor the log's client field: the request keeps its peer's address.
    The log writes the scope's client as the app saw it (request.client reads the same;
    in-process test below)."""
    for value in NOT_ADDRESSES:
        request_id = served.get("/health/", {"X-Forwarded-For": value})
        assert served.logged(request_id)["client"] == PEER, value


def test_a_trusted_network_is_honoured(served: Served) -> None:
    """WEBSERVER_TRUSTED_PROXIES=127.0.0.0/8: a forwarded address from 127.0.0.1 is
    believed (`127.0.0.1/8` was accepted and matched nothing: tests/test_settings.py)."""
    for value, client in [("203.0.113.7", "203.0.113.7"), ("[2001:db8::7]:443", "2001:db8::7"),
                          ("198.51.100.1, 203.0.113.9", "203.0.113.9")]:
        request_id = served.get("/health/", {"X-Forwarded-For": value})
        assert served.logged(request_id)["client"] == client, value


@pytest.mark.parametrize("text", ["/health/", "127.0.0.1", "GET", "/caf\u00e9/\u4e2d", "a b"])
def test_plain_text_is_written_as_it_is(text: str) -> None:
    assert escaped(text) is text  # the check is all a usual request pays


@pytest.mark.parametrize(("text", "written"), [
    ("a\nb", r"a\x0ab"), ("\x1b[31m", r"\x1b[31m"), ('say "hi"', r"say \x22hi\x22"),
    ("back\\slash", r"back\x5cslash"), ("\u2028\x85\u202e", r"\u2028\x85\u202e"),
    ("\U000e0041", r"\U000e0041"), ("\udcff", r"\udcff"),
])
def test_what_could_break_a_line_or_a_terminal_is_escaped(text: str, written: str) -> None:
    assert escaped(text) == written
    assert unescaped(written) == text


def test_the_forwarded_client_check_keeps_the_peer_in_process() -> None:
    """The proxy-headers layer alone, as the app's stack has it: what request.client
    is. A port of 5000 digits (more than int() takes) is no port: the peer stays."""
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(Request(scope).client)

    layer = ForwardedHeadersMiddleware(app, "127.0.0.1", "")
    for value in ["203.0.113.7", "[::1]:80", *NOT_ADDRESSES, "1" * 300,
                  "203.0.113.7:" + "9" * 5000, "[::1]:123456"]:
        scope = {"type": "http", "client": (PEER, 5000),
                 "headers": [(b"x-forwarded-for", value.encode())]}
        asyncio.run(layer(scope, None, None))
    assert seen == [("203.0.113.7", 0), ("::1", 80), *[(PEER, 5000)] * 6]
