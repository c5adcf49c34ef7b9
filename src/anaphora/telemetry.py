"""OpenTelemetry spans per turn and per stage: off by default, enabled with ``otel_exporter`` (extra ``otel``).

The tracer comes from a provider built here and handed to the engine: Anaphora never sets the global provider, so
an application that configures OpenTelemetry itself can pass its own tracer instead.
"""

from __future__ import annotations

from typing import Any

from anaphora.errors import require
from anaphora.settings import TelemetrySettings


def build_tracer(settings: TelemetrySettings) -> Any | None:
    """A tracer for ``settings.otel_exporter`` ("console" or "otlp"), or ``None`` when tracing is off."""
    if settings.otel_exporter == "none":
        return None
    sdk_trace = require("opentelemetry.sdk.trace", package="opentelemetry-sdk", extra="otel", purpose="tracing")
    export = require("opentelemetry.sdk.trace.export", package="opentelemetry-sdk", extra="otel", purpose="tracing")
    resources = require("opentelemetry.sdk.resources", package="opentelemetry-sdk", extra="otel", purpose="tracing")
    if settings.otel_exporter == "console":
        exporter = export.ConsoleSpanExporter()
    else:
        otlp = require(
            "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            package="opentelemetry-exporter-otlp-proto-http",
            extra="otel",
            purpose="OTLP export",
        )
        exporter = otlp.OTLPSpanExporter(endpoint=settings.otel_endpoint or None)
    provider = sdk_trace.TracerProvider(resource=resources.Resource.create({"service.name": "anaphora"}))
    provider.add_span_processor(export.BatchSpanProcessor(exporter))
    return provider.get_tracer("anaphora")
