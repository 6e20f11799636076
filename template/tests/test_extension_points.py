"""Where your code goes, and the template's answers around it (app/custom.py).

In process, through the app as create_app builds it (and create_served_app, for the
proxy headers): a Middleware(...) entry in MIDDLEWARE, your lifespan, a route's own
body limit (BODY_LIMITS), CORS from WEBSERVER_CORS_ORIGINS on the template's own
answers, the path prefix from WEBSERVER_ROOT_PATH or a trusted X-Forwarded-Prefix.
The same promises, booted on every engine with a whole user app, are checked by the
template's own suite (tests/test_user_app.py there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest

from app import custom
from app.core.body_limits import BodyLimit
from app.core.framework import (
    APIRouter,
    BaseHTTPMiddleware,
    FastAPI,
    Middleware,
    Request,
    TestClient,
    WebSocket,
)
from app.core.settings import get_settings
from app.main import create_app
from serving.served_app import create_served_app

ORIGIN = "https://front.example"
LOCAL = "http://localhost"  # a host WEBSERVER_ALLOWED_HOSTS allows by default
router = APIRouter(prefix="/yours")


@router.get("/where", name="where")
async def where(request: Request) -> dict[str, str]:
    return {"url": str(request.url_for("where")), "root_path": request.scope["root_path"]}


@router.post("/upload")
async def upload(request: Request) -> dict[str, int]:
    return {"size": len(await request.body())}


@router.get("/crash")
async def crash() -> None:
    raise RuntimeError("your bug")


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Set WEBSERVER_* names with `settings.setenv`; read afresh by each create_app."""
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def client(app: object, *, peer: str = "127.0.0.1") -> httpx.Client:
    """An in-process client whose requests come from `peer`."""
    async def call(scope, receive, send):  # type: ignore[no-untyped-def]
        scope["client"] = (peer, 50000)
        await app(scope, receive, send)  # type: ignore[operator]

    return TestClient(call, base_url=LOCAL, raise_server_exceptions=False)


class Tagged:
    """A pure ASGI middleware taking an option, as Middleware(Tagged, tag=...) gives it."""

    def __init__(self, app: object, tag: str) -> None:
        self.app, self.tag = app, tag.encode()

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        async def tagged(message):  # type: ignore[no-untyped-def]
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((b"x-tag", self.tag))
            await send(message)

        await self.app(scope, receive, tagged)


def test_middleware_with_options_wraps_the_template_refusals(
        settings: pytest.MonkeyPatch) -> None:
    settings.setattr(custom, "MIDDLEWARE", (Middleware(Tagged, tag="yours"),))
    with client(create_app(user_routers=[router])) as http:
        refused = http.post("/yours/upload", content=b"x" * (get_settings().max_body_size + 1))
        crashed = http.get("/yours/crash")
    assert (refused.status_code, refused.headers["x-tag"]) == (413, "yours")
    assert (crashed.status_code, crashed.headers["x-tag"]) == (500, "yours")
    assert crashed.headers["x-request-id"]


class Broken:
    """A middleware of yours with a bug of its own."""

    def __init__(self, app: object) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and scope["path"] == "/health/":
            raise RuntimeError("the middleware's bug")
        await self.app(scope, receive, send)


def test_a_500_from_your_middleware_still_carries_the_request_id(
        settings: pytest.MonkeyPatch) -> None:
    settings.setenv("WEBSERVER_CORS_ORIGINS", ORIGIN)
    settings.setattr(custom, "MIDDLEWARE", (Broken,))
    with client(create_app()) as http:
        crashed = http.get("/health/", headers={"Origin": ORIGIN})
    assert crashed.status_code == 500  # the body: your handler's for 500, if you have one
    assert crashed.headers["x-request-id"]
    assert crashed.headers["access-control-allow-origin"] == ORIGIN


def test_your_lifespan_runs_and_its_state_reaches_requests(
        settings: pytest.MonkeyPatch) -> None:
    events = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
        events.append("startup")
        yield {"pool": "opened"}
        events.append("shutdown")

    state = APIRouter()

    @state.get("/pool")
    async def pool(request: Request) -> dict[str, str]:
        return {"pool": request.state.pool}

    settings.setattr(custom, "lifespan", lifespan, raising=False)
    with client(create_app(user_routers=[state])) as http:
        assert events == ["startup"]
        assert http.get("/pool").json() == {"pool": "opened"}
    assert events == ["startup", "shutdown"]


def posted(app: object, announced: int | None, size: int, chunk: int) -> tuple[int, int]:
    """POST `size` bytes to /yours/upload in `chunk`-sized messages, as an engine hands
    them over, with a Content-Length (`announced`) or chunked: the answer's status, and
    how many bytes the app pulled."""
    framing = ((b"content-length", b"%d" % announced) if announced is not None
               else (b"transfer-encoding", b"chunked"))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/yours/upload",
             "raw_path": b"/yours/upload", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"localhost"), framing],
             "client": ("127.0.0.1", 50000), "server": ("localhost", 80)}
    pulled, sent = 0, []

    async def receive() -> dict[str, object]:
        nonlocal pulled
        pulled += chunk
        return {"type": "http.request", "body": b"x" * chunk, "more_body": pulled < size}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    return sent[0]["status"], pulled  # type: ignore[return-value]


def test_a_middleware_of_yours_reading_the_body_reads_no_more_than_the_limit(
        settings: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    class ReadsTheBody(BaseHTTPMiddleware):
        """A request logger as tutorials write it: the whole body read in dispatch."""

        async def dispatch(self, request, call_next):  # type: ignore[no-untyped-def]
            seen.append(len(await request.body()))
            return await call_next(request)

    limit, chunk = get_settings().max_body_size, 65536
    settings.setattr(custom, "MIDDLEWARE", (ReadsTheBody,))
    app = create_app(user_routers=[router])
    # An announced body over the limit is refused at its first read; a chunked one at
    # the read after the one that passed the limit.
    assert posted(app, 64 * limit, 64 * limit, chunk) == (413, chunk)
    status, pulled = posted(app, None, 64 * limit, chunk)
    assert (status, seen) == (413, [])
    assert limit < pulled <= limit + 2 * chunk
    assert posted(app, None, 2 * chunk, chunk) == (200, 2 * chunk)
    assert seen == [2 * chunk]


def test_a_route_body_limit_holds_for_that_route_alone(settings: pytest.MonkeyPatch) -> None:
    limit = get_settings().max_body_size
    # raising=False: a custom.py from before 0.8.0 has no BODY_LIMITS (nor lifespan).
    settings.setattr(custom, "BODY_LIMITS", (BodyLimit("/yours/", max_size=4 * limit,
                                                       timeout=0),), raising=False)
    with client(create_app(user_routers=[router])) as http:
        bigger = http.post("/yours/upload", content=b"x" * (2 * limit))
        elsewhere = http.post("/echo/", content=b"x" * (2 * limit))
        too_big = http.post("/yours/upload", content=b"x" * (4 * limit + 1))
    assert bigger.json() == {"size": 2 * limit}
    assert elsewhere.status_code == 413
    assert too_big.status_code == 413


def test_cors_reaches_every_answer(settings: pytest.MonkeyPatch) -> None:
    settings.setenv("WEBSERVER_CORS_ORIGINS", ORIGIN)
    with client(create_app(user_routers=[router])) as http:
        answers = {
            "200": http.get("/health/", headers={"Origin": ORIGIN}),
            "413": http.post("/yours/upload", headers={"Origin": ORIGIN},
                             content=b"x" * (get_settings().max_body_size + 1)),
            "500": http.get("/yours/crash", headers={"Origin": ORIGIN}),
            "400": http.get("/health/", headers={"Origin": ORIGIN, "Host": "evil.example"}),
        }
        other = http.get("/health/", headers={"Origin": "https://evil.example"})
        preflight = http.options("/yours/upload", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert {name: answer.status_code for name, answer in answers.items()} == {
        "200": 200, "413": 413, "500": 500, "400": 400}
    for name, answer in answers.items():
        assert answer.headers.get("access-control-allow-origin") == ORIGIN, name
    assert "x-request-id" in answers["500"].headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in other.headers
    assert preflight.status_code == 200


@pytest.mark.parametrize("value", ["api", "//evil.example", "/a b", "/a?b", "/x';alert(1)"])
def test_a_root_path_that_is_not_a_path_is_refused(settings: pytest.MonkeyPatch,
                                                     value: str) -> None:
    from app.core.settings import SettingsError, load_settings

    settings.setenv("WEBSERVER_ROOT_PATH", value)
    with pytest.raises(SettingsError, match="WEBSERVER_ROOT_PATH="):
        load_settings()


def test_the_path_prefix_from_the_setting_or_a_trusted_proxy(
        settings: pytest.MonkeyPatch) -> None:
    settings.setenv("WEBSERVER_ROOT_PATH", "/svc")
    served = create_served_app(create_app(user_routers=[router]))
    prefixed = {"X-Forwarded-Prefix": "/api"}
    with client(served) as trusted, client(served, peer="203.0.113.9") as stranger:
        by_setting = trusted.get("/yours/where").json()
        # The prefix always goes in front: naming it in the path reaches no route.
        named = trusted.get("/svc/yours/where").status_code
        by_proxy = trusted.get("/yours/where", headers=prefixed).json()
        forged = stranger.get("/yours/where", headers=prefixed).json()
        hostile = [trusted.get("/yours/where", headers={"X-Forwarded-Prefix": value}).json()
                   for value in ("//evil", "/x';alert(1);'", "/a b", "/%2e%2e")]
    assert by_setting == {"url": f"{LOCAL}/svc/yours/where", "root_path": "/svc"}
    assert named == 404
    assert by_proxy == {"url": f"{LOCAL}/api/yours/where", "root_path": "/api"}
    assert forged == by_setting  # not a trusted proxy: its header is not believed
    assert hostile == [by_setting] * 4


def test_a_websocket_message_over_the_cap_closes_with_1009(
        settings: pytest.MonkeyPatch) -> None:
    settings.setenv("WEBSERVER_WS_MAX_MESSAGE_SIZE", "1024")
    echo = APIRouter()

    @echo.websocket("/echo-ws")
    async def echo_ws(websocket: WebSocket) -> None:
        await websocket.accept()
        async for text in websocket.iter_text():
            await websocket.send_text(text)

    with client(create_app(user_routers=[echo])) as http, \
            http.websocket_connect("ws://localhost/echo-ws") as ws:
        ws.send_text("x" * 1024)
        assert ws.receive_text() == "x" * 1024
        ws.send_text("é" * 600)  # 600 characters, 1,200 bytes
        closed = ws.receive()
    assert closed == {"type": "websocket.close", "code": 1009, "reason": "message too big"}
