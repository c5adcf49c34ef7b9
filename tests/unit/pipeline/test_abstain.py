"""Abstention: when no passage passes the relevance floor the engine says the documents do not cover the question,
without calling the model; with the floor off the same question is answered normally."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Message, Settings
from anaphora.pipeline.check import NOT_COVERED
from anaphora.pipeline.engine import ABSTAIN
from anaphora.pipeline.prompt import CONTEXT_OPEN
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

ABSENT = "What is the airspeed velocity of an unladen swallow?"


def make_rag(tmp_path: Path, model: FakeChatModel, **overrides) -> Anaphora:
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", **overrides)
    rag = Anaphora(settings, model=model)
    rag.ingest([SAMPLE_DOCS])
    return rag


@pytest.fixture
def strict_rag(tmp_path: Path, fake_model: FakeChatModel) -> Iterator[Anaphora]:
    rag = make_rag(tmp_path, fake_model, similarity_threshold=0.99)
    yield rag
    rag.close()


def test_absent_topic_abstains_without_a_model_call(strict_rag: Anaphora, fake_model: FakeChatModel) -> None:
    conversation = strict_rag.new_conversation()
    result = strict_rag.ask(ABSENT, conversation)
    trace = result.trace
    assert trace.abstained is True
    assert result.answer == ABSTAIN
    assert "documents do not cover" in result.answer.lower()
    assert fake_model.calls == []
    assert trace.model_calls == 0
    assert trace.retrieved == []
    assert result.citations == []
    assert not trace.retrieval_skipped
    # retrieval ran and found candidates; the floor removed them all
    assert trace.stage("retrieve").status == "ok"
    select = trace.stage("select")
    assert "below similarity 0.99" in select.detail
    generate = trace.stage("answer")
    assert generate.status == "skipped"
    assert "abstained" in generate.detail
    metrics = strict_rag.components.engine.metrics
    assert metrics.value("anaphora_abstentions_total") == 1
    assert metrics.value("anaphora_model_calls_total", purpose="answer") == 0
    assert metrics.value("anaphora_turns_total") == 1
    # the abstention is remembered like any answer
    turns = strict_rag._runner.run(strict_rag.components.conversations.turns("local", conversation))
    assert [t.answer for t in turns] == [ABSTAIN]
    assert turns[0].trace.abstained


def test_each_abstention_is_counted(strict_rag: Anaphora) -> None:
    strict_rag.ask(ABSENT)
    strict_rag.ask("Who won the 1966 football world cup?")
    assert strict_rag.components.engine.metrics.value("anaphora_abstentions_total") == 2


def test_streaming_an_abstention_yields_the_abstain_text(strict_rag: Anaphora, fake_model: FakeChatModel) -> None:
    items = list(strict_rag.stream(ABSENT))
    *deltas, result = items
    assert "".join(deltas) == ABSTAIN
    assert result.trace.abstained and result.answer == ABSTAIN
    assert fake_model.calls == []


def test_chit_chat_never_abstains(strict_rag: Anaphora, fake_model: FakeChatModel) -> None:
    result = strict_rag.ask("hello!")
    assert result.trace.retrieval_skipped and not result.trace.abstained
    assert len(fake_model.calls) == 1
    assert strict_rag.components.engine.metrics.value("anaphora_abstentions_total") == 0


def test_a_question_about_what_no_passage_mentions_abstains_even_with_the_floor_off(
    tmp_path: Path, fake_model: FakeChatModel
) -> None:
    """The coverage check: "unladen" is in no passage and rare in English, and no candidate is close to the query."""
    rag = make_rag(tmp_path, fake_model, similarity_threshold=0.0)
    try:
        result = rag.ask(ABSENT)
        assert result.trace.abstained and result.answer.startswith(NOT_COVERED) and not fake_model.calls
        assert result.answer.endswith("no page mentions unladen.")  # what the documents do not cover, named
        assert "no passage mentions" in result.trace.stage("coverage").detail
    finally:
        rag.close()


def test_same_question_is_answered_with_the_floor_off(tmp_path: Path, fake_model: FakeChatModel) -> None:
    rag = make_rag(tmp_path, fake_model, similarity_threshold=0.0, uncovered_similarity=0.0)  # no floor, no check
    try:
        result = rag.ask(ABSENT)
        assert not result.trace.abstained
        assert result.answer != ABSTAIN
        assert len(fake_model.calls) == 1 and result.trace.model_calls == 1
        assert CONTEXT_OPEN in fake_model.calls[0].messages[-1].content
        assert result.trace.retrieved
        assert result.trace.stage("answer").status == "ok"
        assert rag.components.engine.metrics.value("anaphora_abstentions_total") == 0
        assert rag.components.engine.metrics.value("anaphora_model_calls_total", purpose="answer") == 1
    finally:
        rag.close()


def test_a_present_topic_passes_a_moderate_floor(tmp_path: Path, fake_model: FakeChatModel) -> None:
    # the floor is a relevance floor, not an off switch: a passage's own words pass it
    rag = make_rag(tmp_path, fake_model, similarity_threshold=0.5)
    try:
        chunk = rag.components.corpus.chunks([1])[1]
        result = rag.ask(chunk.text)
        assert not result.trace.abstained
        assert result.trace.retrieved[0].id == chunk.id
        assert result.trace.retrieved[0].dense_score >= 0.5
    finally:
        rag.close()


def test_follow_up_abstention_counts_only_the_rewrite_call(strict_rag: Anaphora, fake_model: FakeChatModel) -> None:
    history = [Message(role="user", content=ABSENT), Message(role="assistant", content=ABSTAIN)]
    result = strict_rag.ask("And what about African swallows?", history=history)
    assert result.trace.abstained and result.answer == ABSTAIN
    assert len(fake_model.calls) == 1  # the rewrite; no answer call
    assert "Rewrite the user's last message" in fake_model.calls[0].messages[0].content
    assert result.trace.model_calls == 1
    metrics = strict_rag.components.engine.metrics
    assert metrics.value("anaphora_model_calls_total", purpose="answer") == 0
    assert metrics.value("anaphora_model_calls_total", purpose="rewrite") == 1
    assert metrics.value("anaphora_abstentions_total") == 1


def test_passages_that_do_not_fit_the_budget_are_not_called_irrelevant(
    tmp_path: Path, fake_model: FakeChatModel
) -> None:
    rag = make_rag(tmp_path, fake_model, similarity_threshold=0.0, context_window=512, answer_max_tokens=380)
    try:
        result = rag.ask("How do I install Kestrel on Kubernetes?")
        trace = result.trace
        assert trace.retrieved  # relevant passages passed the floor ...
        assert trace.budget is not None and trace.budget.passages_kept == 0  # ... but none fit the prompt
        claims_irrelevant = trace.abstained and (
            "relevan" in result.answer or "relevance" in trace.stage("answer").detail
        )
        assert not claims_irrelevant
    finally:
        rag.close()
