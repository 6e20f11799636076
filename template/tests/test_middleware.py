"""Every middleware in app/middleware, and every ASGI wrapper of the serving layer
(serving/), passes body chunks and granian's pathsend intact.

Found by walking the packages, not by a list: a new middleware is checked the day it
is added. Each is driven with a downstream app that answers with a pathsend (what a
FileResponse sends under granian) and one that answers with body chunks.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import app.middleware as middleware_package
import serving
from app import custom
from app.core import tracing
from app.core.framework import CORSMiddleware, Middleware
from app.core.setting_specs import BY_NAME
from app.core.settings import get_settings
from app.custom import MIDDLEWARE as CUSTOM_MIDDLEWARE
from app.main import create_app
from app.middleware import ORDER, middleware_layers
from app.middleware.access_log import FORMATS as ACCESS_LOG_FORMATS
from app.middleware.metrics_path import MetricsPathMiddleware
from app.middleware.start_headers import StartHeadersMiddleware
from app.middleware.tracing import TracingMiddleware
from serving.served_app import create_served_app

START = {"type": "http.response.start", "status": 200,
         "headers": [(b"content-type", b"text/plain"), (b"x-downstream", b"kept")]}
PATHSEND = {"type": "http.response.pathsend", "path": "/srv/static/file.txt"}
BODY = [{"type": "http.response.body", "body": b"first ", "more_body": True},
        {"type": "http.response.body", "body": b"second", "more_body": False}]
SCOPE = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
         "scheme": "http", "path": "/static/file.txt", "raw_path": b"/static/file.txt",
         "query_string": b"", "root_path": "", "headers": [(b"host", b"localhost")],
         "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
         "extensions": {"http.response.pathsend": {}}}


def discovered() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(middleware_package.__path__):
        module = importlib.import_module(f"{middleware_package.__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            # dir() of a class lists what it and its bases define, not what `type` does.
            asgi_callable = "__call__" in dir(obj) and not inspect.isabstract(obj)
            asgi_callable = asgi_callable and obj is not StartHeadersMiddleware  # the base
            if obj.__module__ == module.__name__ and asgi_callable:
                found.append(obj)
    return found


def asgi_wrapper(obj: type) -> bool:
    """Built around an app, and called as an ASGI app is."""
    call = obj.__dict__.get("__call__")
    init = obj.__dict__.get("__init__")
    if call is None or init is None:
        return False
    return (list(inspect.signature(call).parameters)[1:4] == ["scope", "receive", "send"]
            and list(inspect.signature(init).parameters)[1:2] == ["app"])


def served_wrappers() -> list[type]:
    """The ASGI wrappers anywhere in serving/, engines included."""
    found = []
    for info in pkgutil.walk_packages(serving.__path__, f"{serving.__name__}."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ == module.__name__ and asgi_wrapper(obj):
                found.append(obj)
    return found


def built(wrapper: type) -> Any:
    """`wrapper` around an app, its other arguments the settings of the same name."""
    settings = get_settings()
    names = list(inspect.signature(wrapper).parameters)[1:]
    return lambda app: wrapper(app, **{name: getattr(settings, name) for name in names
                                       if hasattr(settings, name)})


def downstream(*messages: dict[str, Any]):
    async def app(scope: Any, receive: Any, send: Any) -> None:
        for message in messages:
            await send(dict(message))
    return app


def drive(wrap: Any, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(wrap(downstream(*messages))(dict(SCOPE), receive, send))
    return sent


def stack(app: Any) -> Any:
    """The stack create_app builds, access log and Server-Timing on, around `app` in place
    of its router."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BY_NAME["access_log"].env, "text")
        patch.setenv(BY_NAME["server_timing"].env, "true")
        get_settings.cache_clear()
        try:
            # The template's layers alone: a BaseHTTPMiddleware of yours would send the
            # body in its own chunks (Starlette's doing, not the template's).
            application = create_app(middleware=middleware_layers(yours=()))
            application.router = app  # the innermost app of build_middleware_stack
            return application.build_middleware_stack()
        finally:
            get_settings.cache_clear()


class Passing:
    """A middleware of yours that changes nothing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        return self.app(scope, receive, send)


def installed(monkeypatch: pytest.MonkeyPatch, access_log: str) -> set[type]:
    """The classes in the stack create_app really builds, fused members included
    (Server-Timing, off by default, on)."""
    monkeypatch.setenv(BY_NAME["access_log"].env, access_log)
    monkeypatch.setenv(BY_NAME["server_timing"].env, "true")
    if access_log == "json":  # and /metrics on the app's port, and traces on (exported nowhere)
        monkeypatch.setenv(BY_NAME["metrics"].env, "path")
        from opentelemetry.sdk.trace import TracerProvider

        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
        monkeypatch.setattr(tracing, "_provider", TracerProvider())
        # and a middleware of yours, which brings the layers that run only before yours
        monkeypatch.setattr(custom, "MIDDLEWARE", (*custom.MIDDLEWARE, Passing))
    get_settings.cache_clear()
    layer: Any = create_app().build_middleware_stack()
    found: set[type] = set()
    while (inner := getattr(layer, "app", None)) is not None:
        found.add(type(layer))
        found.update(type(provider) for provider in getattr(layer, "providers", ()))
        found.update(type(part) for part in getattr(layer, "parts", ()))
        layer = inner
    return found


def test_the_package_has_middleware_and_all_of_it_is_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert discovered(), "no middleware found in app/middleware"
    try:
        built = [installed(monkeypatch, name) for name in ("off", *ACCESS_LOG_FORMATS)]
    finally:
        get_settings.cache_clear()
    assert set(discovered()) <= set().union(*built)
    yours = {entry.cls if isinstance(entry, Middleware) else entry for entry in CUSTOM_MIDDLEWARE}
    # The access log off, and the rest on but for CORS, /metrics on the app's port and traces.
    rest = set(ORDER) - {*ACCESS_LOG_FORMATS.values(), CORSMiddleware, MetricsPathMiddleware,
                         TracingMiddleware}
    assert {*rest, *yours} <= built[0]


def test_the_serving_layer_has_wrappers_and_all_of_them_are_checked() -> None:
    names = {wrapper.__name__ for wrapper in served_wrappers()}
    # gunicorn's worker puts one in front of the app (the app's own layers are discovered()).
    assert "WebSocketsOff" in names


def with_metrics_path(app: Any) -> Any:
    """The whole stack as every engine serves it (serving/served_app.py), /metrics on
    the app's port (WEBSERVER_METRICS=path: one layer more)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BY_NAME["metrics"].env, "path")
        get_settings.cache_clear()
        try:
            return create_served_app(stack(app))
        finally:
            get_settings.cache_clear()


CASES = [pytest.param(m, id=m.__name__) for m in discovered()]
CASES += [pytest.param(built(w), id=f"serving.{w.__name__}") for w in served_wrappers()]
CASES.append(pytest.param(stack, id="whole-stack"))
CASES.append(pytest.param(with_metrics_path, id="whole-stack-metrics-path"))


@pytest.mark.parametrize("wrap", CASES)
def test_pathsend_reaches_the_server_after_an_intact_start(wrap: Any) -> None:
    sent = drive(wrap, START, PATHSEND)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.pathsend"]
    assert sent[0]["status"] == 200
    assert set(START["headers"]) <= set(sent[0]["headers"])
    assert sent[1] == PATHSEND


@pytest.mark.parametrize("wrap", CASES)
def test_body_chunks_reach_the_server_intact(wrap: Any) -> None:
    sent = drive(wrap, START, *BODY)
    assert [m["type"] for m in sent] == ["http.response.start", *(m["type"] for m in BODY)]
    assert set(START["headers"]) <= set(sent[0]["headers"])
    assert sent[1:] == BODY


def start_of(sent: list[dict[str, Any]]) -> dict[bytes, list[bytes]]:
    headers: dict[bytes, list[bytes]] = {}
    for name, value in sent[0]["headers"]:
        headers.setdefault(name, []).append(value)
    return headers


def test_headers_the_app_set_itself_are_left_alone() -> None:
    own = {"type": "http.response.start", "status": 200,
           "headers": [(b"x-frame-options", b"SAMEORIGIN"), (b"server-timing", b"db;dur=3")]}
    headers = start_of(drive(stack, own, *BODY))
    assert headers[b"x-frame-options"] == [b"SAMEORIGIN"]
    assert headers[b"server-timing"] == [b"db;dur=3"]
    assert headers[b"x-content-type-options"] == [b"nosniff"]  # the others still added
    assert len(headers[b"x-request-id"]) == 1


ANSWER_HEADERS = {
    "request_id": {b"x-request-id"},
    "security_headers": {b"x-content-type-options", b"x-frame-options", b"referrer-policy"},
    "server_timing": {b"server-timing"},
}


@pytest.mark.parametrize(("changed", "expected"), [
    ({}, {"request_id", "security_headers"}),  # the defaults: Server-Timing off
    ({"server_timing": "true"}, {"request_id", "security_headers", "server_timing"}),
    ({"request_id": "false"}, {"security_headers"}),
    ({"security_headers": "false", "request_id": "false"}, set()),
])
def test_each_header_layer_is_a_setting(monkeypatch: pytest.MonkeyPatch,
                                        changed: dict[str, str], expected: set[str]) -> None:
    for name, value in changed.items():
        monkeypatch.setenv(BY_NAME[name].env, value)
    monkeypatch.setenv(BY_NAME["access_log"].env, "text")  # writes `-` for no request id
    get_settings.cache_clear()
    try:
        application = create_app(middleware=middleware_layers(yours=()))  # as stack() says
        application.router = downstream(START, *BODY)  # type: ignore[assignment]
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        asyncio.run(application.build_middleware_stack()(dict(SCOPE), receive, send))
    finally:
        get_settings.cache_clear()
    names = set(start_of(sent))
    for setting, headers in ANSWER_HEADERS.items():
        assert (headers <= names) is (setting in expected), setting
        assert not (headers & names) or setting in expected, setting
    assert sent[1:] == BODY


@pytest.mark.parametrize(("given", "kept"), [
    (b"req-42.a_B", True), (b"has space", False), (b"x" * 129, False)])
def test_a_sane_caller_request_id_is_kept_and_another_replaced(given: bytes, kept: bool) -> None:
    scope = {**SCOPE, "headers": [(b"host", b"localhost"), (b"x-request-id", given)]}
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    asyncio.run(stack(downstream(START, *BODY))(scope, receive, send))
    (request_id,) = start_of(sent)[b"x-request-id"]
    assert (request_id == given) is kept
    assert scope["state"]["request_id"] == request_id.decode()  # what the access log writes
    if not kept:
        assert len(request_id) == 32 and int(request_id, 16) >= 0
