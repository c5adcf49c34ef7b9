"""OpenTelemetry spans: one per turn with a child per stage, off unless configured."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.telemetry import build_tracer
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit


def test_spans_per_turn_and_stage(settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Anaphora(settings, model=FakeChatModel()) as rag:
        rag.components.engine.tracer = provider.get_tracer("test")
        rag.ingest([SAMPLE_DOCS])
        conversation = rag.new_conversation()
        rag.ask("How do I install Kestrel on Kubernetes?", conversation)
        rag.ask("Thanks!", conversation)
    spans = exporter.get_finished_spans()
    turns = [s for s in spans if s.name == "anaphora.turn"]
    assert len(turns) == 2
    first_stages = {s.name for s in spans if s.parent and s.parent.span_id == turns[0].context.span_id}
    assert {"anaphora.route", "anaphora.query", "anaphora.retrieve", "anaphora.answer"} <= first_stages
    assert turns[0].attributes["anaphora.model_calls"] == 1
    assert turns[1].attributes["anaphora.retrieval_skipped"] is True
    retrieve = next(s for s in spans if s.name == "anaphora.retrieve")
    assert retrieve.attributes["anaphora.status"] == "ok"


def test_tracing_is_off_by_default(settings: Settings) -> None:
    assert build_tracer(settings.telemetry) is None
    assert build_tracer(settings.with_updates(otel_exporter="console").telemetry) is not None
