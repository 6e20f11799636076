"""The fused layer (app/middleware/fused_layers.py) answers as the classes it runs do
when each is its own layer: the same status, headers, body, access line and metrics,
for ordinary and hostile requests, the access log and metrics on.

Each request is sent twice, in-process, to create_app with the template's stack: once
fused (what create_app builds), once with every class a layer of its own (wrapped in
Starlette's Middleware, which fuse() leaves alone).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import trio

from app.core import metrics as core_metrics
from app.core.framework import APIRouter, ClientDisconnect, FastAPI, Request, StreamingResponse
from app.core.setting_specs import BY_NAME
from app.core.settings import get_settings
from app.core.stopping import OPEN_STREAMS, server_stopping
from app.main import as_middleware, create_app
from app.middleware import middleware_layers
from app.middleware.access_log import AccessLogMiddleware
from app.middleware.fused_layers import FusedLayers

router = APIRouter(prefix="/fused")


@router.get("/ok")
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.post("/upload")
async def upload(request: Request) -> dict[str, int]:
    return {"size": len(await request.body())}


@router.get("/crash")
async def crash() -> None:
    raise RuntimeError("crashed on purpose")


@router.get("/late")
async def late() -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"first"
        raise RuntimeError("failed after the response started")

    return StreamingResponse(chunks())


@router.get("/gone")
async def gone() -> None:
    raise ClientDisconnect()


@router.get("/where")
async def where(request: Request) -> dict[str, Any]:
    """What the proxy headers made of the request."""
    return {"client": list(request.client or ()), "scheme": request.url.scheme,
            "root_path": request.scope["root_path"], "url": str(request.url)}


@router.get("/stream")
async def stream() -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"first"
        yield b"second"

    return StreamingResponse(chunks())


@router.get("/endless")
async def endless() -> StreamingResponse:
    async def ticks() -> AsyncIterator[bytes]:
        while True:  # a stream that never looks at server_stopping
            yield b"tick\n"
            await asyncio.sleep(0.01)

    return StreamingResponse(ticks())


HOST = (b"host", b"localhost")
MANY = [(b"x-filler-%d" % n, b"x") for n in range(101)]
BIG = 2_000_000  # over the default WEBSERVER_MAX_BODY_SIZE
# name -> (method, path, headers, body chunks, http version)
REQUESTS: dict[str, tuple[str, str, list[tuple[bytes, bytes]], list[bytes], str]] = {
    "health": ("GET", "/health/", [HOST], [], "1.1"),
    "a route of yours": ("GET", "/fused/ok", [HOST, (b"accept", b"*/*")], [], "1.1"),
    "unmatched": ("GET", "/nowhere", [HOST], [], "1.1"),
    "forged host": ("GET", "/health/", [(b"host", b"evil.example")], [], "1.1"),
    "two hosts": ("GET", "/health/", [HOST, HOST], [], "1.1"),
    "no host": ("GET", "/health/", [], [], "1.0"),
    "101 headers": ("GET", "/health/", [HOST, *MANY], [], "1.1"),
    "request id given": ("GET", "/health/", [HOST, (b"x-request-id", b"abc-123")], [], "1.1"),
    "insane id, then a sane one": ("GET", "/health/", [
        HOST, (b"x-request-id", b"bad id!"), (b"x-request-id", b"good-1")], [], "1.1"),
    "small upload": ("POST", "/fused/upload", [HOST, (b"content-length", b"5")],
                     [b"hello"], "1.1"),
    "announced too large": ("POST", "/fused/upload", [
        HOST, (b"content-length", str(BIG).encode())], [b"x" * 10], "1.1"),
    "chunked too large": ("POST", "/fused/upload", [
        HOST, (b"transfer-encoding", b"chunked")], [b"x" * 600_000] * 4, "1.1"),
    "chunked, cut short": ("POST", "/fused/upload", [
        HOST, (b"transfer-encoding", b"chunked")], [b"x" * 10, b"DISCONNECT"], "1.1"),
    "HTTP/2 body, no length": ("POST", "/fused/upload", [HOST], [b"abc"], "2"),
    "HTTP/2 body too large": ("POST", "/fused/upload", [HOST], [b"x" * 600_000] * 4, "2"),
    "a 500": ("GET", "/fused/crash", [HOST], [], "1.1"),
    "a failure after the start": ("GET", "/fused/late", [HOST], [], "1.1"),
    "client gone": ("GET", "/fused/gone", [HOST], [], "1.1"),
    "odd method": ("BREW", "/fused/ok", [HOST], [], "1.1"),
    "a probe": ("GET", "/livez", [(b"host", b"10.0.0.7")], [], "1.1"),
    "a probe's path under a prefix": ("GET", "/readyz", [
        HOST, (b"x-forwarded-prefix", b"/api")], [], "1.1"),
    "forwarded by a trusted proxy": ("GET", "/fused/where", [
        HOST, (b"x-forwarded-for", b"203.0.113.7, 10.0.0.1"),
        (b"x-forwarded-proto", b"https"), (b"x-forwarded-prefix", b"/api")], [], "1.1"),
    "nothing forwarded": ("GET", "/fused/where", [HOST], [], "1.1"),
    "forwarded by trusted proxies only": ("GET", "/fused/where", [
        HOST, (b"x-forwarded-for", b"127.0.0.1"), (b"x-forwarded-prefix", b"/api")], [], "1.1"),
    "forged forwarded client": ("GET", "/fused/where", [
        HOST, (b"x-forwarded-for", b"not-an-address")], [], "1.1"),
    "a stream": ("GET", "/fused/stream", [HOST], [], "1.1"),
}
VARYING = {b"server-timing", b"date"}  # the value differs from one call to the next


@pytest.fixture(scope="module")
def apps() -> Iterator[tuple[FastAPI, FastAPI]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BY_NAME["access_log"].env, "text")
        patch.setenv(BY_NAME["metrics"].env, "port")
        patch.setenv(BY_NAME["server_timing"].env, "true")  # every layer that has one
        get_settings.cache_clear()
        try:
            # The template's stack as a new project has it (middleware of yours would
            # split it into two fused runs, around yours).
            layers = middleware_layers(yours=())
            fused = create_app(middleware=layers, user_routers=[router])
            apart = create_app(middleware=[as_middleware(layer) for layer in layers],
                               user_routers=[router])
            for app in (fused, apart):  # each access line into a buffer of the app's
                app.state.lines = io.StringIO()
                for layer in _walk(app):
                    for part in (layer, *getattr(layer, "parts", ())):
                        if isinstance(part, AccessLogMiddleware):
                            part.stream = app.state.lines
            yield fused, apart
        finally:
            get_settings.cache_clear()


def call(app: FastAPI, name: str, on_trio: bool = False) -> tuple[list[dict[str, Any]], list[Any]]:
    method, path, headers, chunks, version = REQUESTS[name]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": version,
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "headers": list(headers),
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
             "extensions": {}}
    incoming = [{"type": "http.request", "body": chunk, "more_body": True}
                for chunk in chunks or [b""]]
    if incoming[-1]["body"] == b"DISCONNECT":
        incoming[-1] = {"type": "http.disconnect"}
    else:
        incoming[-1]["more_body"] = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await anyio.sleep(3600)  # a client that stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    table = core_metrics.server_metrics().durations
    table.clear()
    try:
        if on_trio:  # Hypercorn's trio worker: no asyncio loop
            trio.run(app, scope, receive, send)
        else:
            asyncio.run(app(scope, receive, send))
    except RuntimeError:
        sent.append({"type": "raised"})
    # The requests counted, by their labels (not their durations, which vary).
    observed = sorted((key, sum(row[:-1])) for key, row in table.rows.items())
    table.clear()
    return sent, observed


def shown(sent: list[dict[str, Any]], given_id: bool) -> list[Any]:
    """The messages, with the values that differ by design (a new request id, the time
    taken) replaced by their shape."""
    result: list[Any] = []
    for message in sent:
        if message["type"] == "http.response.start":
            headers = []
            for name, value in message["headers"]:
                if name in VARYING or (name == b"x-request-id" and not given_id):
                    value = re.sub(rb"[0-9a-f.]+", b"#", value)  # 9.87 and 12.34 alike
                headers.append((name, value))
            result.append((message["status"], sorted(headers)))
        else:
            result.append({k: v for k, v in message.items()})
    return result


def access_lines(app: FastAPI) -> list[str]:
    """The app's access lines since the last call, less what varies (the time, the
    duration, a new request id)."""
    text = app.state.lines.getvalue()
    app.state.lines.seek(0)
    app.state.lines.truncate()
    return [re.sub(r"[0-9a-f]{32}$", "ID", re.sub(r"^\S+ | [0-9.]+ms ", " ", line))
            for line in text.splitlines()]


def answered(app: FastAPI, name: str, on_trio: bool = False) -> tuple[Any, ...]:
    """The request `name` answered by `app`: the messages (shown), the access lines and
    the requests counted."""
    given_id = any(header == b"x-request-id" for header, _ in REQUESTS[name][2])
    sent, counted = call(app, name, on_trio=on_trio)
    assert sent, name
    return shown(sent, given_id), access_lines(app), counted


@pytest.mark.parametrize("name", REQUESTS)
def test_the_fused_layer_answers_as_the_classes_apart(
        name: str, apps: tuple[FastAPI, FastAPI]) -> None:
    fused, apart = apps
    assert answered(fused, name) == answered(apart, name)


def test_create_app_fuses_the_default_stack_into_one_layer(
        apps: tuple[FastAPI, FastAPI]) -> None:
    fused, apart = apps
    kinds = [type(layer) for layer in _walk(fused)]
    assert kinds.count(FusedLayers) == 1
    assert {type(part) for part in next(
        layer for layer in _walk(fused) if isinstance(layer, FusedLayers)).parts} >= set(
        middleware_layers(yours=()))
    assert FusedLayers not in {type(layer) for layer in _walk(apart)}


@pytest.mark.parametrize("name", ["nothing forwarded", "forwarded by a trusted proxy",
                                  "forged forwarded client", "a probe"])
def test_the_root_path_is_put_in_front_as_the_class_puts_it(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BY_NAME["root_path"].env, "/mounted")
    get_settings.cache_clear()
    try:
        layers = middleware_layers(yours=())  # the template's stack alone, as in apps()
        fused = create_app(middleware=layers, user_routers=[router])
        apart = create_app(middleware=[as_middleware(layer) for layer in layers],
                           user_routers=[router])
        got_fused, _ = call(fused, name)  # the stack is built at the first call
        got_apart, _ = call(apart, name)
    finally:
        get_settings.cache_clear()
    path = REQUESTS[name][1]
    assert shown(got_fused, False) == shown(got_apart, False)
    if path == "/fused/where":  # a trusted proxy's prefix wins over the setting
        expected = "/api" if name == "forwarded by a trusted proxy" else "/mounted"
        assert json.loads(got_fused[1]["body"])["root_path"] == expected


def cut_at_the_stop(app: FastAPI, cut: bool = True) -> tuple[list[dict[str, Any]], str]:
    """/fused/endless, open, then cancelled as OpenStreams.end_at_stop cancels a stream
    still open at the stop (`cut`), or as an engine cancels a request (not `cut`).
    The messages sent, and how the request's task ended."""

    async def run() -> tuple[list[dict[str, Any]], str]:
        sent: list[dict[str, Any]] = []
        ticking = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            ticking.set()

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": "/fused/endless",
                 "raw_path": b"/fused/endless", "query_string": b"", "root_path": "",
                 "headers": [HOST], "client": ("127.0.0.1", 5000),
                 "server": ("127.0.0.1", 8000), "extensions": {}}
        task = asyncio.create_task(app(scope, receive, send))
        await asyncio.wait_for(ticking.wait(), 5)
        noted = OPEN_STREAMS.streams(asyncio.get_running_loop())
        assert [open_task for open_task, _ in noted] == [task]
        noted[0][1].cut = cut
        task.cancel()
        try:
            await asyncio.wait_for(task, 5)
        except asyncio.CancelledError:
            ended = "cancelled"
        else:
            ended = "returned"
        assert task not in OPEN_STREAMS.open
        return sent, ended

    return asyncio.run(run())


@pytest.mark.parametrize("cut", [True, False], ids=["by the stop", "by the engine"])
def test_a_stream_open_at_the_stop_ends_as_the_class_ends_it(
        cut: bool, apps: tuple[FastAPI, FastAPI], caplog: pytest.LogCaptureFixture) -> None:
    fused, apart = apps
    got: dict[str, tuple[str, list[Any], int]] = {}
    for name, app in (("fused", fused), ("apart", apart)):
        caplog.clear()
        sent, ended = cut_at_the_stop(app, cut=cut)
        lines = [r for r in caplog.records if "Stopping: ended the stream" in r.getMessage()]
        assert sent[0]["type"] == "http.response.start", sent
        assert b"content-length" not in dict(sent[0]["headers"])
        assert all(m["type"] == "http.response.body" for m in sent[1:]), sent
        got[name] = (ended, sent[-1], len(lines), access_lines(app))
    assert got["fused"][3] == got["apart"][3]  # the same access lines, if any
    if cut:  # ended properly: the last chunk sent, one line said, the task returns
        last = {"type": "http.response.body", "body": b"", "more_body": False}
        assert got["fused"][:3] == got["apart"][:3] == ("returned", last, 1)
    else:  # an engine's cancel is the engine's
        assert got["fused"][0] == got["apart"][0] == "cancelled"
        assert got["fused"][2] == got["apart"][2] == 0


@pytest.mark.parametrize("name", ["a route of yours", "a stream", "a probe", "a 500"])
def test_an_answer_after_the_stop_closes_its_connection_as_the_class_says(
        name: str, apps: tuple[FastAPI, FastAPI]) -> None:
    fused, apart = apps
    server_stopping.flag.set()  # the flag alone: no waiter of another test is woken
    try:
        got_fused, _ = call(fused, name)
        got_apart, _ = call(apart, name)
    finally:
        server_stopping.flag.clear()
    access_lines(fused), access_lines(apart)
    assert shown(got_fused, False) == shown(got_apart, False)
    closes = (b"connection", b"close") in got_fused[0]["headers"]
    assert closes is (name != "a probe"), got_fused[0]  # the probes come first


@pytest.mark.parametrize("name", ["a probe", "forwarded by a trusted proxy", "a stream",
                                  "forwarded by trusted proxies only", "a route of yours",
                                  "forged host"])
def test_on_trio_the_fused_layer_answers_as_on_asyncio(
        name: str, apps: tuple[FastAPI, FastAPI]) -> None:
    fused, _ = apps
    assert answered(fused, name, on_trio=True) == answered(fused, name)


def _walk(app: FastAPI) -> Iterator[Any]:
    if app.middleware_stack is None:
        app.middleware_stack = app.build_middleware_stack()
    layer: Any = app.middleware_stack
    while layer is not None:
        yield layer
        layer = getattr(layer, "app", None)
