"""OpenTelemetry traces and the log records that carry them.

In-process, with the SDK's in-memory exporter: the span a request gets. On every
engine, with the OTLP/HTTP exporter sending to a small receiver here that decodes
the protobuf: the span as exported, the caller's trace id in the JSON access log
line and the response, the app's own log records as JSON with the request's ids, and
the engine's lines as JSON too. Off, nothing of the SDK is imported.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.core import logs, tracing
from app.core.answers import PROJECT_SLUG
from app.core.framework import APIRouter, TestClient
from app.main import create_app
from app.middleware import layers
from app.middleware.tracing import TracingMiddleware
from tests import served
from tests.server_process import PROJECT_DIR, running_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def exported() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def client(provider: TracerProvider) -> TestClient:
    # Routes of the test's own, as yours would be: the demo router may be gone.
    failing = APIRouter()

    @failing.get("/tracing-test/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"item_id": item_id}

    @failing.get("/tracing-test/fails")
    async def fails() -> None:
        raise RuntimeError("a bug")

    app = create_app(middleware=(partial(TracingMiddleware, provider=provider),
                                 *layers(metrics=False)),
                     user_routers=[failing])
    return TestClient(app, base_url="http://localhost", raise_server_exceptions=False)


def test_a_request_continues_the_callers_trace(exported: Any) -> None:
    provider, exporter = exported
    with client(provider) as http:
        answer = http.get("/tracing-test/items/7", headers={"traceparent": TRACEPARENT})
    (span,) = exporter.get_finished_spans()
    assert span.name == "GET /tracing-test/items/{item_id}" and span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID  # type: ignore[union-attr]
    assert dict(span.attributes) == {  # type: ignore[arg-type]
        "http.request.method": "GET", "url.path": "/tracing-test/items/7", "url.scheme": "http",
        "network.protocol.version": "1.1", "client.address": "testclient",
        "http.route": "/tracing-test/items/{item_id}", "http.response.status_code": 200}
    assert span.status.status_code is StatusCode.UNSET
    # Out: the response names the server span, in the caller's trace.
    assert answer.headers["traceparent"] == f"00-{TRACE_ID}-{span.context.span_id:016x}-01"


def test_without_a_caller_a_request_starts_a_trace(exported: Any) -> None:
    provider, exporter = exported
    with client(provider) as http:
        answer = http.get("/health/")
    (span,) = exporter.get_finished_spans()
    assert span.parent is None and span.name == "GET /health/"
    assert answer.headers["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")


def test_unmatched_requests_and_errors(exported: Any) -> None:
    provider, exporter = exported
    with client(provider) as http:
        assert http.get("/no/such/path").status_code == 404
        assert http.get("/tracing-test/fails").status_code == 500
    unmatched, failed = exporter.get_finished_spans()
    assert unmatched.name == "GET" and "http.route" not in unmatched.attributes  # type: ignore[operator]
    assert unmatched.status.status_code is StatusCode.UNSET  # a 4xx is the client's
    assert failed.name == "GET /tracing-test/fails"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "500"  # type: ignore[index]


@pytest.mark.parametrize(("environment", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
])
def test_traces_are_on_only_when_the_standard_variables_ask(environment: dict[str, str],
                                                            on: bool) -> None:
    assert tracing.configured(environment) is on


@pytest.mark.parametrize(("environment", "refused"), [
    ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER names 'jaeger'"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
     "OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not one"),
    ({"OTEL_TRACES_EXPORTER": "otlp,console"}, None),
])
def test_an_exporter_that_cannot_work_is_one_sentence(environment: dict[str, str],
                                                      refused: str | None) -> None:
    reason = tracing.refusal(environment)
    assert (reason is None) if refused is None else reason.startswith(refused)  # type: ignore[union-attr]


@pytest.mark.slow
def test_off_no_layer_is_added_and_no_sdk_imported() -> None:
    """What `bench app` measures as free: the app without traces is the app."""
    script = ("import sys; from app.main import create_app; app = create_app(); "
              "stack = app.build_middleware_stack(); names = []\n"
              "while stack is not None:\n"
              "    names += [type(part).__name__ for part in getattr(stack, 'parts', ())]\n"
              "    names.append(type(stack).__name__); stack = getattr(stack, 'app', None)\n"
              "print(json.dumps([names, 'opentelemetry.sdk' in sys.modules]))")
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", "import json\n" + script], cwd=PROJECT_DIR,
                            env=env, capture_output=True, text=True, timeout=60)
    names, sdk_imported = json.loads(result.stdout)
    assert "TracingMiddleware" not in names and "MetricsMiddleware" in names
    assert sdk_imported is False


def test_a_json_record_is_one_ascii_line_with_the_request_ids() -> None:
    """What WEBSERVER_LOG_FORMAT=json writes: a separator a line reader would split at
    escaped, the request's ids from its context, the traceback in one field."""
    def logged() -> str:
        try:
            raise ValueError("bad input")
        except ValueError:
            record = logging.LogRecord("app.x", logging.ERROR, __file__, 1,
                                       "user said %s", ("a\u2028b\nc",), sys.exc_info())
        return logs.JsonFormatter().format(record)

    line = contextvars.copy_context().run(lambda: (
        logs.REQUEST_ID.set("req-9"), logs.TRACE_ID.set(TRACE_ID), logged())[-1])
    assert line.isascii() and len(line.splitlines()) == 1
    entry = json.loads(line)
    assert entry["message"] == "user said a\u2028b\nc"
    assert (entry["request_id"], entry["trace_id"]) == ("req-9", TRACE_ID)
    assert entry["exception"].endswith("ValueError: bad input")
    # Outside a request (a context where no layer set them): no ids.
    assert "request_id" not in json.loads(contextvars.Context().run(logged))


# --- On every engine, through the OTLP/HTTP exporter.


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP endpoint: every span POSTed to /v1/traces, decoded, with its
    resource attributes."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.spans: list[tuple[dict[str, Any], Any]] = []
        self.paths: list[str] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ReceiverHandler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.paths.append(self.path)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                self.server.spans += [(resource, span) for span in scope_spans.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def lines_of(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@pytest.mark.demo_routes
@pytest.mark.slow
@pytest.mark.parametrize("engine", served.ENGINES)
def test_the_callers_trace_reaches_the_access_log_the_logs_and_the_collector(
        engine: str, receiver: Receiver) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
           "WEBSERVER_ACCESS_LOG": "json", "WEBSERVER_LOG_FORMAT": "json",
           "WEBSERVER_LOG_LEVEL": "debug"}
    with running_server(["--engine", engine, "--workers", "2"], env=env) as server:
        answer = httpx.get(f"{server.url}/demo/items/7", headers={"traceparent": TRACEPARENT})
        echoed = httpx.post(f"{server.url}/demo/echo", content=b"four",
                            headers={"traceparent": TRACEPARENT, "X-Request-ID": "echo-1"})
        deadline = time.monotonic() + 10
        while len([s for _, s in receiver.spans if s.trace_id.hex() == TRACE_ID]) < 2:
            assert time.monotonic() < deadline, f"no spans exported: {receiver.paths}"
            time.sleep(0.1)
        output = server.output()
    assert answer.status_code == echoed.status_code == 200
    assert answer.headers["traceparent"].split("-")[1] == TRACE_ID
    # Every line of the server's output is JSON: the engine's and the launcher's too.
    lines = lines_of(output)
    (access,) = [line for line in lines if line.get("path") == "/demo/items/7"]
    assert access["trace_id"] == TRACE_ID and access["status"] == 200
    (record,) = [line for line in lines if line.get("message") == "echo received 4 bytes"]
    assert record["logger"] == "app.api.demo" and record["level"] == "DEBUG"
    assert (record["request_id"], record["trace_id"]) == ("echo-1", TRACE_ID)
    assert any(line.get("message", "").startswith("Starting ") for line in lines)
    # Exported over OTLP/HTTP, as protobuf, to /v1/traces.
    spans = {span.name: (resource, span) for resource, span in receiver.spans
             if span.trace_id.hex() == TRACE_ID}
    resource, span = spans["GET /demo/items/{item_id}"]
    assert span.parent_span_id.hex() == PARENT_ID and span.kind == span.SPAN_KIND_SERVER
    assert resource["service.name"] == PROJECT_SLUG
    assert "POST /demo/echo" in spans and set(receiver.paths) == {"/v1/traces"}
