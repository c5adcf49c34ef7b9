"""One owner of the stream: what a streaming client is sent is what the answer phase decided. The Redact stage of
docs/architecture.md (run from the page's own code) changes the answer after the answer stage; in every
``answer_check`` mode no client, through the engine or through ``/v1/chat/completions`` with ``stream: true``, ever
gets what it removes. A stage that returns a change it does not declare fails the turn, and what reached the stream
is the answer stage's text, never that change."""

from __future__ import annotations

import re
from pathlib import Path

import openai
import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.errors import PipelineError
from anaphora.pipeline.engine import Engine
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from tests.conftest import SAMPLE_DOCS
from tests.server_harness import components_for, serve, settings_for, sse_events, token

pytestmark = pytest.mark.unit

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
QUESTION = "How do I install Kestrel on Kubernetes?"
REMOVED = "kestrel"  # in every passage the question finds, so in every answer before the redaction
MODES = ["off", "mark", "drop"]


def add_documented_redact(engine: Engine) -> None:
    """Define ``Redact`` from the documentation's own example and add it the way the page says."""
    block = next(b for b in re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(), re.S) if "class Redact" in b)
    code, adds, _ = block.partition("rag.components.engine.add_stage")
    assert adds and 'add_stage(Redact(), after="answer")' in block
    namespace: dict = {}
    exec(compile(code, str(ARCHITECTURE), "exec"), namespace)
    engine.add_stage(namespace["Redact"](words=(REMOVED,)), after="answer")


def engine_settings(tmp_path: Path, mode: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", similarity_threshold=0.0, answer_check=mode
    )


@pytest.mark.parametrize("mode", MODES)
def test_the_documented_redact_stage_never_streams_what_it_removes(tmp_path: Path, mode: str) -> None:
    with Anaphora(engine_settings(tmp_path, mode), model=FakeChatModel(token_delay_s=0.001)) as rag:
        rag.ingest([SAMPLE_DOCS])
        add_documented_redact(rag.components.engine)
        assert not rag.components.engine.streams_live()  # held: a later stage may change the answer
        *deltas, result = list(rag.stream(QUESTION, rag.new_conversation()))
    streamed = "".join(deltas)
    assert "[redacted]" in result.answer  # the model's answer had the word: the test is not vacuous
    assert REMOVED not in streamed.lower() and not any(REMOVED in d.lower() for d in deltas)
    assert streamed == result.answer
    record = result.trace.stage("redact")
    assert record is not None and record.status == "ok"


@pytest.mark.parametrize("mode", MODES)
def test_the_http_stream_never_sends_what_the_redact_stage_removes(tmp_path: Path, mode: str) -> None:
    settings = settings_for(tmp_path, answer_check=mode)
    components = components_for(settings, FakeChatModel(token_delay_s=0.001))
    add_documented_redact(components.engine)
    with (
        serve(settings, components) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key=token("alice"), max_retries=0, timeout=30) as client,
    ):
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        chunks = [c.choices[0].delta.content or "" for c in stream if c.choices]
    text = "".join(chunks)
    assert "[redacted]" in text
    assert REMOVED not in text.lower() and not any(REMOVED in c.lower() for c in chunks)


def test_without_a_later_stage_the_answer_streams_as_it_is_generated(tmp_path: Path) -> None:
    reply = "Kestrel installs with Helm. It runs as a DaemonSet. Each node gets one agent."
    with Anaphora(engine_settings(tmp_path, "off"), model=FakeChatModel([reply], token_delay_s=0.001)) as rag:
        rag.ingest([SAMPLE_DOCS])
        assert rag.components.engine.streams_live()
        *deltas, result = list(rag.stream(QUESTION, rag.new_conversation()))
    assert len(deltas) >= 3 and "".join(deltas) == result.answer == reply  # sentence by sentence


class Undeclared(Stage):
    """Returns a change of the answer though it declares it changes nothing (a Redact that lies)."""

    name = "undeclared"
    reads = ("answer",)
    writes = ()

    async def run(self, state: TurnState) -> StageResult:
        return StageResult({"answer": state.answer.replace("Kestrel", "K.")}, "ok")


@pytest.mark.parametrize("stream", [False, True])
def test_a_stage_that_returns_what_it_does_not_declare_fails_the_turn(sample_rag: Anaphora, stream: bool) -> None:
    engine = sample_rag.components.engine
    engine.add_stage(Undeclared(), after="answer")
    assert engine.streams_live()  # it declares no write: the engine trusts that, and the change has no channel
    conversation = sample_rag.new_conversation()
    streamed: list[str] = []
    with pytest.raises(PipelineError, match="'undeclared' returned a change of 'answer'") as caught:
        if stream:
            streamed.extend(sample_rag.stream(QUESTION, conversation))  # the deltas, until the turn fails
        else:
            sample_rag.ask(QUESTION, conversation)
    assert "add 'answer' to Undeclared.writes" in (caught.value.hint or "")
    assert sample_rag.turns(conversation) == []  # nothing stored
    if stream:  # what reached the stream: the answer stage's own text, never the undeclared change
        text = "".join(streamed)
        assert "Kestrel" in text and "K." not in text


def test_over_http_a_stage_that_returns_what_it_does_not_declare_never_streams_its_change(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    components = components_for(settings, FakeChatModel(token_delay_s=0.001))
    components.engine.add_stage(Undeclared(), after="answer")
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    with (
        serve(settings, components) as running,
        running.client() as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        events = sse_events(response)
    deltas = [e["choices"][0]["delta"].get("content") or "" for e in events if isinstance(e, dict) and e.get("choices")]
    text = "".join(deltas)
    assert "Kestrel" in text and "K." not in text  # the answer stage's text went out; the change did not
    errors = [e["error"] for e in events if isinstance(e, dict) and "error" in e]
    assert len(errors) == 1 and events[-1] == "[DONE]"  # the turn failed after the 200: an error event, then done


class ReadsSelection(Stage):
    name = "reads_selection"
    reads = ("question", "selected")
    writes = ()

    async def run(self, state: TurnState) -> StageResult:
        return StageResult({}, "ok")


def test_a_stage_that_reads_what_no_earlier_stage_writes_is_refused_naming_the_field(rag: Anaphora) -> None:
    engine = rag.components.engine
    before = [s.name for s in engine.stages]
    with pytest.raises(PipelineError, match="'reads_selection' reads 'selected'"):
        engine.add_stage(ReadsSelection(), after="route")
    assert [s.name for s in engine.stages] == before  # refused, the list unchanged
    engine.add_stage(ReadsSelection(), after="select")
    assert "reads_selection" in [s.name for s in engine.stages]


def test_a_stage_that_declares_a_field_the_state_does_not_have_is_refused(rag: Anaphora) -> None:
    class Typo(Stage):
        name = "typo"
        reads = ("answr",)
        writes = ()

    with pytest.raises(PipelineError, match="'answr', which is not a TurnState field"):
        rag.components.engine.add_stage(Typo(), after="cite")


def test_a_stage_class_that_does_not_declare_what_it_writes_is_refused_when_it_is_defined() -> None:
    """Silence is not "writes nothing": a Redact that forgets ``writes = ("answer",)`` never runs, so it can never
    let the engine stream the answer it meant to change."""
    with pytest.raises(PipelineError, match="Redact does not declare writes") as caught:

        class Redact(Stage):
            name = "redact"
            reads = ("answer",)

            async def run(self, state: TurnState) -> StageResult:
                return StageResult({"answer": state.answer.replace("Kestrel", "K.")})

    assert "writes = (...)" in (caught.value.hint or "")


def test_only_the_answer_stage_is_handed_the_stream(sample_rag: Anaphora) -> None:
    """The stream is not part of the turn's state: a stage sees no sink, and what the client is sent is the final
    answer, streamed by the answer stage alone."""
    seen: list[bool] = []

    class Peek(Stage):
        name = "peek"
        reads = ("answer",)
        writes = ()

        async def run(self, state: TurnState) -> StageResult:
            seen.append(hasattr(state, "sink"))
            return StageResult()

    sample_rag.components.engine.add_stage(Peek(), after="retrieve")
    *deltas, result = list(sample_rag.stream(QUESTION, sample_rag.new_conversation()))
    assert seen == [False]
    assert "".join(deltas) == result.answer and result.answer
