"""OpenTelemetry traces: off unless the standard OTEL_* variables ask for them.

On when OTEL_TRACES_EXPORTER names an exporter other than `none`, or an OTLP endpoint is
set; off whenever OTEL_SDK_DISABLED=true. Off, nothing of the SDK is imported and no
layer is added, so a request pays nothing for it. On, each worker sets up the SDK from
the environment as the SDK's documentation reads it; `console` writes to stderr, since
stdout is the access log's, and service.name is the project's slug unless you name it.
OTLP over gRPC needs its package: `make add PKG=opentelemetry-exporter-otlp-proto-grpc`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import Any

from app.core.answers import PROJECT_SLUG

HTTP_PROTOBUF = "http/protobuf"
GRPC = "grpc"
GRPC_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
EXPORTERS = ("otlp", "console", "none")


def _words(value: str) -> list[str]:
    return [word.strip().lower() for word in value.split(",") if word.strip()]


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    named = _words(environ.get("OTEL_TRACES_EXPORTER", ""))
    if named:
        return any(name != "none" for name in named)
    return bool(environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def exporter_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    return [name for name in _words(environ.get("OTEL_TRACES_EXPORTER", "")) or ["otlp"]
            if name != "none"]


def protocol(environ: Mapping[str, str] = os.environ) -> str:
    return (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or HTTP_PROTOBUF).strip().lower()


def refusal(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the traces asked for cannot be sent (one sentence), or None."""
    if not configured(environ):
        return None
    for name in exporter_names(environ):
        if name not in EXPORTERS:
            return (f"OTEL_TRACES_EXPORTER names {name!r}, an exporter this service does "
                    f"not have: choose {', '.join(EXPORTERS)}.")
    if "otlp" in exporter_names(environ):
        chosen = protocol(environ)
        if chosen == GRPC and importlib.util.find_spec(GRPC_EXPORTER.rsplit(".", 1)[0]) is None:
            return ("OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) needs the "
                    "opentelemetry-exporter-otlp-proto-grpc package: add it (make add "
                    f"PKG=opentelemetry-exporter-otlp-proto-grpc), or use {HTTP_PROTOBUF}.")
        if chosen not in (GRPC, HTTP_PROTOBUF):
            return (f"OTEL_EXPORTER_OTLP_PROTOCOL={chosen} is not one this service speaks: "
                    f"choose {HTTP_PROTOBUF} or {GRPC}.")
    return None


_provider: Any = None


def provider() -> Any:
    """This process's tracer provider, set up from the environment on first use and
    made the global one (your code's `trace.get_tracer(__name__)` spans join the
    request's trace)."""
    global _provider
    if _provider is None:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: PROJECT_SLUG}))
        _provider = TracerProvider(resource=resource)
        for exporter in _exporters() if configured() else []:
            _provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(_provider)
    return _provider


def _exporters() -> list[Any]:
    exporters: list[Any] = []
    for name in exporter_names():
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        elif protocol() == GRPC:
            exporters.append(importlib.import_module(GRPC_EXPORTER).OTLPSpanExporter())
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())  # it reads OTEL_EXPORTER_OTLP_* itself
    return exporters


def flush() -> None:
    """Send the spans still batched (a worker that stops, a recycled one included)."""
    if _provider is not None:
        _provider.force_flush()
