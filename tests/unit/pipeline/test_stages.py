"""The stage contract: a custom stage added through the public API shows in the trace, the metrics and the spans;
every optional stage fails open, by construction, whatever goes wrong inside it."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

FIRST = "How do I install Kestrel on Kubernetes?"
FOLLOW_UP = "And on ARM?"


class Shout(Stage):
    """A custom stage: upper-cases the answer, and says how long it was."""

    name = "shout"
    reads = ("answer",)
    writes = ("answer",)

    async def run(self, state: TurnState) -> StageResult:
        return StageResult({"answer": state.answer.upper()}, "ok", f"{len(state.answer)} characters")


def test_a_custom_stage_shows_in_trace_metrics_and_spans(settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Anaphora(settings, model=FakeChatModel(["Use the Helm chart."])) as rag:
        engine = rag.components.engine
        engine.tracer = provider.get_tracer("test")
        engine.add_stage(Shout(), after="answer")
        rag.ingest([SAMPLE_DOCS])
        result = rag.ask(FIRST, rag.new_conversation())
        metrics = engine.metrics
        assert metrics.value("anaphora_stage_runs_total", stage="shout", status="ok") == 1
        assert metrics.value("anaphora_stage_seconds_count", stage="shout") == 1
    assert result.answer.startswith("USE THE HELM CHART") and result.answer == result.answer.upper()
    names = [s.name for s in result.trace.stages]
    assert names.index("shout") == names.index("answer") + 1
    record = result.trace.stage("shout")
    assert record is not None and record.detail.endswith(" characters") and record.ms >= 0
    span = next(s for s in exporter.get_finished_spans() if s.name == "anaphora.shout")
    assert span.attributes["anaphora.status"] == "ok"


def test_adding_after_an_unknown_stage_says_which_exist(rag: Anaphora) -> None:
    with pytest.raises(ValueError, match="memory_epoch, route, acknowledge, query"):
        rag.components.engine.add_stage(Shout(), after="nope")


def test_the_stage_list_reads_as_the_pipeline(rag: Anaphora) -> None:
    names = [s.name for s in rag.components.engine.stages]
    assert names == [
        "memory_epoch",
        "route",
        "acknowledge",
        "query",
        "skip_gate",
        "personal_query",
        "retrieve",
        "select",
        "coverage",
        "memory",
        "budget",
        "answer",
        "cite",
        "link_citations",
    ]


def _break(stage: Stage, failure: str) -> None:
    """Make ``stage.run`` fail in one of the ways an optional stage can."""

    async def broken(state: TurnState) -> StageResult:
        if failure == "timeout":
            await asyncio.sleep(5)
        if failure == "model":
            from anaphora.errors import ModelUnavailableError

            raise ModelUnavailableError("endpoint down", hint="start it")
        raise RuntimeError("unexpected")

    stage.run = broken  # type: ignore[method-assign]
    if failure == "timeout":
        stage.timeout_s = 0.05


OPTIONAL = [
    "memory_epoch",
    "acknowledge",
    "query",
    "skip_gate",
    "personal_query",
    "select",
    "coverage",
    "memory",
    "link_citations",
]


@pytest.mark.parametrize("failure", ["error", "model", "timeout"])
@pytest.mark.parametrize("name", OPTIONAL)
def test_every_optional_stage_fails_open(sample_rag: Anaphora, fake_model: FakeChatModel, name: str, failure: str):
    engine = sample_rag.components.engine
    optional = [s.name for s in engine.stages if s.fallback(_initial(), "probe") is not None]
    assert optional == OPTIONAL  # a new optional stage joins this test by declaring a fallback
    conversation = sample_rag.new_conversation()
    sample_rag.ask(FIRST, conversation)
    _break(next(s for s in engine.stages if s.name == name), failure)
    result = sample_rag.ask(FOLLOW_UP, conversation)
    status = "timeout" if failure == "timeout" else "error"
    record = result.trace.stage(name)
    assert record is not None and record.status == status
    assert result.answer and result.trace.retrieved  # the turn degraded, it did not fail
    assert engine.metrics.value("anaphora_stage_runs_total", stage=name, status=status) == 1
    assert len(sample_rag.turns(conversation)) == 2


def _initial() -> TurnState:
    from anaphora.pipeline.query import QueryPlan
    from anaphora.testing.stages import turn_state

    return turn_state(FOLLOW_UP, plan=QueryPlan(FOLLOW_UP, "question"))


def test_a_required_stage_that_fails_fails_the_turn_and_stores_nothing(sample_rag: Anaphora) -> None:
    engine = sample_rag.components.engine
    conversation = sample_rag.new_conversation()
    _break(next(s for s in engine.stages if s.name == "retrieve"), "error")
    with pytest.raises(RuntimeError, match="unexpected"):
        sample_rag.ask(FIRST, conversation)
    assert sample_rag.turns(conversation) == []
