"""The skip gate through the whole engine: chit-chat and questions about the conversation are answered without
retrieval (one model call, no context block), counted, replayed as skipped; follow-ups always retrieve."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Message, Settings, TurnResult
from anaphora.evaluation import Task, replay, retrieval_half, score
from anaphora.pipeline.prompt import CONTEXT_CLOSE, CONTEXT_OPEN
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

FIRST = "How do I install Kestrel on Kubernetes?"


def stage_names(result: TurnResult) -> list[str]:
    return [s.name for s in result.trace.stages]


def skipped(rag: Anaphora, reason: str) -> float:
    return rag.components.engine.metrics.value("anaphora_retrievals_skipped_total", reason=reason)


def assert_skipped(result: TurnResult, fake_model: FakeChatModel, calls_before: int, kind: str) -> None:
    trace = result.trace
    assert trace.retrieval_skipped is True
    assert trace.route == kind
    assert trace.route_reason
    assert "retrieve" not in stage_names(result)
    assert "query" not in stage_names(result)
    assert "select" not in stage_names(result)
    assert trace.stage("route").status == "ok"
    assert trace.stage("answer").status == "ok"
    assert trace.retrieved == []
    assert result.citations == []
    assert trace.model_calls == 1
    assert len(fake_model.calls) == calls_before + 1
    prompt = fake_model.calls[-1].messages[-1].content
    assert CONTEXT_OPEN not in prompt and CONTEXT_CLOSE not in prompt
    assert prompt == result.question.strip()  # the bare question, nothing wrapped around it
    assert not trace.abstained


def test_chit_chat_on_turn_one_skips_retrieval(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    conversation = sample_rag.new_conversation()
    result = sample_rag.ask("hi", conversation)
    assert_skipped(result, fake_model, 0, "chit_chat")
    assert stage_names(result) == ["memory_epoch", "route", "memory", "budget", "answer", "cite"]
    assert skipped(sample_rag, "chit_chat") == 1
    assert skipped(sample_rag, "meta") == 0
    metrics = sample_rag.components.engine.metrics
    assert metrics.value("anaphora_routes_total", kind="chit_chat") == 1
    assert metrics.value("anaphora_model_calls_total", purpose="answer") == 1
    assert metrics.value("anaphora_model_calls_total", purpose="rewrite") == 0


def test_chit_chat_and_meta_later_in_a_conversation_skip(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    conversation = sample_rag.new_conversation()
    first = sample_rag.ask(FIRST, conversation)
    assert not first.trace.retrieval_skipped and first.trace.retrieved

    before = len(fake_model.calls)
    meta = sample_rag.ask("say that again, shorter", conversation)
    assert_skipped(meta, fake_model, before, "meta")
    # answered from the history: the earlier turn is in the prompt, verbatim
    sent = fake_model.calls[-1].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1].content.endswith(FIRST) and sent[2].content == first.answer

    before = len(fake_model.calls)
    thanks = sample_rag.ask("Thanks, that was very helpful!", conversation)
    assert_skipped(thanks, fake_model, before, "chit_chat")

    assert skipped(sample_rag, "meta") == 1
    assert skipped(sample_rag, "chit_chat") == 1
    # the skipped turns are stored with their traces like any other
    stored = asyncio.run(sample_rag.components.conversations.turns("local", conversation))
    assert [t.trace.retrieval_skipped for t in stored] == [False, True, True]
    assert [t.trace.route for t in stored] == ["new_query", "meta", "chit_chat"]


def test_meta_looking_first_turn_retrieves(sample_rag: Anaphora) -> None:
    result = sample_rag.ask("say that again, shorter", sample_rag.new_conversation())
    assert not result.trace.retrieval_skipped
    assert result.trace.route == "new_query"
    assert "retrieve" in stage_names(result)
    assert skipped(sample_rag, "meta") == 0


def test_follow_up_is_never_skipped(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    conversation = sample_rag.new_conversation()
    sample_rag.ask(FIRST, conversation)
    for question in ("And on ARM?", "thanks, and what about ARM?"):
        result = sample_rag.ask(question, conversation)
        assert not result.trace.retrieval_skipped, question
        assert result.trace.route == "follow_up", question
        assert result.trace.stage("retrieve").status == "ok"
        assert result.trace.retrieved
        assert CONTEXT_OPEN in fake_model.calls[-1].messages[-1].content
    assert skipped(sample_rag, "chit_chat") == skipped(sample_rag, "meta") == 0


def test_stateless_history_also_enables_the_meta_skip(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    history = [
        Message(role="user", content=FIRST),
        Message(role="assistant", content="Use the Helm chart."),
    ]
    result = sample_rag.ask("what was my first question?", history=history)
    assert_skipped(result, fake_model, 0, "meta")


def test_skip_gate_off_retrieves_for_every_turn(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", similarity_threshold=0.0, skip_gate=False
    )
    model = FakeChatModel()
    with Anaphora(settings, model=model) as rag:
        rag.ingest([SAMPLE_DOCS])
        conversation = rag.new_conversation()
        hello = rag.ask("hi", conversation)
        rag.ask(FIRST, conversation)
        again = rag.ask("say that again, shorter", conversation)
        for result, kind in ((hello, "chit_chat"), (again, "meta")):
            assert not result.trace.retrieval_skipped
            assert result.trace.route == kind  # still classified, only not acted upon
            assert "retrieve" in stage_names(result)
            prompt = next(c for c in reversed(model.calls) if c.messages[-1].content.endswith(result.question))
            assert CONTEXT_OPEN in prompt.messages[-1].content
        assert rag.components.engine.metrics.value("anaphora_retrievals_skipped_total", reason="chit_chat") == 0
        assert rag.components.engine.metrics.value("anaphora_retrievals_skipped_total", reason="meta") == 0


async def test_replay_records_skipped_turns_with_empty_rankings(sample_rag: Anaphora) -> None:
    history = [Message(role="user", content=FIRST), Message(role="assistant", content="Use the Helm chart.")]
    tasks = [
        Task(task_id="greet", history=[], question="hello!", gold=["install-kubernetes.md#1"]),
        Task(task_id="first", history=[], question=FIRST, gold=["install-kubernetes.md#1"]),
        Task(task_id="meta", history=history, question="say that again, shorter", gold=["install-kubernetes.md#1"]),
        Task(task_id="follow", history=history, question="And on ARM?"),
    ]
    records = await replay(retrieval_half(sample_rag.components), tasks, "pipeline")
    by_id = {r["task_id"]: r for r in records}
    for task_id, route in (("greet", "chit_chat"), ("meta", "meta")):
        record = by_id[task_id]
        assert record["skipped"] is True
        assert record["ranked"] == []
        assert record["route"] == route
        assert record["model_calls"] == 0
        assert record["rewrite_status"] is None
        assert set(record["timings_ms"]) == {"route"}
    for task_id in ("first", "follow"):
        assert by_id[task_id]["skipped"] is False
        assert by_id[task_id]["ranked"]
    assert by_id["follow"]["route"] == "follow_up"
    report = score(records, [5])
    assert report["retrievals_skipped"] == 2
    assert report["metrics"]["all"]["n"] == 3  # "follow" has no gold
