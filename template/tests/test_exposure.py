"""What a served app gives out by default, on every engine (docs/security.md, "Exposure").

Each engine is booted once with the declared defaults: no API docs, a health report
that tells its status only, a Host that is not allowed answered 400 (never copied into
a Location), a browser's WebSocket handshake from another origin answered 403, and the
probes answered whatever host they name. The settings' other values are checked
in-process below; tests/test_boot.py serves the docs and the full report.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.core.setting_specs import BY_NAME
from app.core.settings import get_settings
from app.middleware.allowed_hosts import AllowedHostsMiddleware
from app.middleware.security_headers import SECURITY_HEADERS
from tests import served
from tests.request_set import handshake, status_line
from tests.served import READY
from tests.server_process import running_server

EXPOSURE = ("api_docs", "health_detail", "allowed_hosts", "ws_origins")
# The declared defaults, whatever a developer's .env says.
DEFAULTS = {BY_NAME[name].env: BY_NAME[name].text(BY_NAME[name].default) for name in EXPOSURE}
DOCS = ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect")
FORGED_HOSTS = ("evil.example", "evil.example:8000", "localhost.evil.example",
                "127.0.0.1.evil.example", "[::2]")


@dataclass
class Served:
    docs: list[int]
    detail: dict[str, Any]
    forged: list[httpx.Response]
    local: list[tuple[str, int, str | None]]  # (Host, status, Location) of /health
    no_host: str
    probes: list[tuple[int, str]]
    handshakes: dict[str, str]


def http10_without_host(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /health/ HTTP/1.0\r\n\r\n")
        return status_line(sock)


def answer_to(url: str, headers: dict[str, str]) -> str:
    with contextlib.closing(handshake(url, headers)) as sock:
        return status_line(sock).split(" ")[1]


@pytest.fixture(scope="module", params=served.ENGINES)
def served(request: pytest.FixtureRequest) -> Served:
    with running_server(["--engine", request.param], env=DEFAULTS) as server:
        url, port = server.url, int(server.url.rsplit(":", 1)[1])
        own = f"127.0.0.1:{port}"
        return Served(
            docs=[httpx.get(f"{url}{path}").status_code for path in DOCS],
            detail=httpx.get(f"{url}/health/detailed").json(),
            forged=[httpx.get(f"{url}/health", headers={"Host": host}) for host in FORGED_HOSTS],
            local=[(host, answer.status_code, answer.headers.get("location"))
                   for host in ("localhost", f"localhost:{port}", "LOCALHOST", own,
                                f"[::1]:{port}")
                   for answer in [httpx.get(f"{url}/health", headers={"Host": host})]],
            no_host=http10_without_host(port),
            # A Kubernetes probe names the pod's IP.
            probes=[(answer.status_code, answer.text) for path in ("/livez", "/readyz")
                    for answer in [httpx.get(f"{url}{path}", headers={"Host": "10.42.0.7:8000"})]],
            handshakes={
                "no origin": answer_to(url, {"Host": own}),
                "same origin": answer_to(url, {"Host": own, "Origin": f"http://{own}"}),
                "same origin, https": answer_to(url, {"Host": own, "Origin": f"https://{own}"}),
                "another origin": answer_to(url, {"Host": own, "Origin": "https://evil.example"}),
                "another port": answer_to(url, {"Host": own, "Origin": "http://127.0.0.1:1"}),
                "null origin": answer_to(url, {"Host": own, "Origin": "null"}),
                "forged host": answer_to(url, {"Host": "evil.example"}),
            },
        )


def test_the_defaults_are_the_safe_ones() -> None:
    assert DEFAULTS == {"WEBSERVER_API_DOCS": "false", "WEBSERVER_HEALTH_DETAIL": "minimal",
                        "WEBSERVER_ALLOWED_HOSTS": "localhost,127.0.0.1,::1",
                        "WEBSERVER_WS_ORIGINS": "self"}


def test_no_api_docs(served: Served) -> None:
    assert served.docs == [404] * len(DOCS)


def test_the_health_report_tells_its_status_only(served: Served) -> None:
    assert served.detail == {"status": "ok"}


def test_a_forged_host_gets_400_and_is_never_echoed(served: Served) -> None:
    for answer in served.forged:
        assert (answer.status_code, answer.text) == (400, "Invalid host header")
        assert "location" not in answer.headers
        assert answer.headers["x-request-id"]  # refused inside the other middleware
        for name, value in SECURITY_HEADERS:
            assert answer.headers[name.decode()] == value.decode()


def test_local_names_are_served_and_no_name_is_not(served: Served) -> None:
    # The redirect from /health to /health/ names the host as the request did.
    assert [(status, location) for _, status, location in served.local] == [
        (307, f"http://{host}/health/") for host, _, _ in served.local]
    # None named (HTTP/1.0): refused on every engine (granian hands the app an empty Host).
    assert served.no_host.split(" ")[1] == "400"


def test_probes_answer_whatever_host_they_name(served: Served) -> None:
    assert served.probes == [(200, "ok"), READY]


def test_a_cross_origin_websocket_handshake_is_refused(served: Served) -> None:
    refused, accepted = "403", "101"
    assert served.handshakes == {
        "no origin": accepted, "same origin": accepted, "same origin, https": accepted,
        "another origin": refused, "another port": refused, "null origin": refused,
        "forged host": refused,
    }


# The settings' other values, in-process: the middleware as create_app builds it.

@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def build(**settings: str) -> AllowedHostsMiddleware:
        for name, value in settings.items():
            monkeypatch.setenv(BY_NAME[name].env, value)
        get_settings.cache_clear()
        return AllowedHostsMiddleware(answer_ok)

    yield build
    get_settings.cache_clear()


async def answer_ok(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def first_answer(app: Any, kind: str, headers: dict[str, str]) -> object:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": kind, "path": "/", "headers": [
        (name.lower().encode(), value.encode()) for name, value in headers.items()]}
    asyncio.run(app(scope, receive, send))
    return sent[0].get("status") or sent[0]["type"].rpartition(".")[2]


@pytest.mark.parametrize(("allowed", "host", "status"), [
    ("*.example.com,api.example.org", "a.example.com", 200),
    ("*.example.com,api.example.org", "a.b.example.com:443", 200),
    ("*.example.com,api.example.org", "example.com", 400),
    ("*.example.com,api.example.org", "API.example.org:8443", 200),
    ("*.example.com,api.example.org", "example.com.evil.example", 400),
    ("*.example.com,api.example.org", "localhost", 400),
    ("*", "anything.example", 200),
    ("localhost,::1", "[::1]", 200),
    ("localhost,::1", "[::1]:8000", 200),
    ("localhost,::1", "", 400),
])
def test_allowed_hosts(configured: Any, allowed: str, host: str, status: int) -> None:
    app = configured(allowed_hosts=allowed)
    assert first_answer(app, "http", {"Host": host}) == status


@pytest.mark.parametrize(("origins", "origin", "answer"), [
    ("https://app.example.com", "https://app.example.com", "accept"),
    ("https://app.example.com", "https://app.example.com/", "accept"),
    ("https://app.example.com", "http://localhost:8000", "close"),  # self not listed
    ("self,https://app.example.com", "http://localhost:8000", "accept"),
    ("self,https://app.example.com", "https://evil.example", "close"),
    ("*", "https://evil.example", "accept"),
])
def test_websocket_origins(configured: Any, origins: str, origin: str, answer: str) -> None:
    app = configured(ws_origins=origins)
    assert first_answer(app, "websocket", {"Host": "localhost:8000", "Origin": origin}) == answer


@pytest.mark.demo_routes
def test_the_event_stream_is_documented_as_one() -> None:
    """/demo/events answers text/event-stream: its schema says so, not JSON (Schemathesis
    ST105 found the difference)."""
    from app.main import create_app

    answers = create_app().openapi()["paths"]["/demo/events"]["get"]["responses"]
    assert list(answers["200"]["content"]) == ["text/event-stream"]
