"""Grounded answers through whole turns: drop, mark and extractive modes, streaming, citations from support."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Message, Settings
from anaphora.answering.support import strip_markers
from anaphora.pipeline.check import ABSTAIN, LEFT_OUT
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

FIRST = "How do I install Kestrel on Kubernetes?"
ARM = "Architecture-specific tags also exist, `3.4.1-amd64` and `3.4.1-arm64`."
INVENTED = "Then run sudo systemctl start kestrel-host -n 128.04k to finish."


def make(tmp_path: Path, model: FakeChatModel, **overrides) -> Anaphora:
    overrides.setdefault("similarity_threshold", 0.0)  # the hashing embedder's cosines are not MiniLM's
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", **overrides)
    rag = Anaphora(settings, model=model)
    rag.ingest([SAMPLE_DOCS])
    return rag


def test_drop_removes_the_invented_command_and_says_so(tmp_path: Path) -> None:
    with make(tmp_path, FakeChatModel([f"{ARM} {INVENTED}"])) as rag:
        result = rag.ask("Which image tags exist for arm64 on Kubernetes?")
    assert "systemctl" not in result.answer and "128.04k" not in result.answer
    assert strip_markers(result.answer.replace(LEFT_OUT, "")).strip() == ARM
    assert result.answer.endswith(LEFT_OUT)
    kept = [v for v in result.trace.support if v.kept]
    dropped = [v for v in result.trace.support if not v.kept]
    assert len(kept) == 1 and len(dropped) == 1 and "128.04k" in dropped[0].missing
    assert result.citations and result.citations[0].how == "supported"
    assert result.citations[0].id == kept[0].passage_id
    assert f"[{kept[0].passage_id}]" in result.answer
    metrics = rag.components.engine.metrics
    assert metrics.value("anaphora_answer_units_total", verdict="unsupported", kept="false") == 1
    assert metrics.value("anaphora_answer_units_total", verdict="supported", kept="true") == 1


def test_mark_leaves_a_capable_models_supported_paraphrase_untouched(tmp_path: Path) -> None:
    paraphrase = (
        "Kestrel publishes architecture-specific tags, 3.4.1-amd64 and 3.4.1-arm64, for registry mirrors that "
        "do not support manifest lists."
    )
    with make(tmp_path, FakeChatModel([paraphrase]), answer_check="mark") as rag:
        result = rag.ask("Which image tags exist for arm64 on Kubernetes?")
    assert result.answer == paraphrase  # not a character changed
    assert [v.verdict for v in result.trace.support] == ["supported"]
    assert result.trace.support[0].passage_id == result.citations[0].id


def test_mark_reports_an_unsupported_unit_without_removing_it(tmp_path: Path) -> None:
    with make(tmp_path, FakeChatModel([f"{ARM} {INVENTED}"]), answer_check="mark") as rag:
        result = rag.ask("Which image tags exist for arm64 on Kubernetes?")
    assert INVENTED in result.answer
    assert [v.verdict for v in result.trace.support] == ["supported", "unsupported"]


def test_auto_quotes_the_passages_when_nothing_of_the_answer_is_supported(tmp_path: Path) -> None:
    with make(tmp_path, FakeChatModel([INVENTED])) as rag:
        result = rag.ask(FIRST)
    assert result.trace.answer_source == "extractive"
    assert "systemctl" not in result.answer
    assert result.citations and all(c.id in {p.id for p in result.trace.retrieved} for c in result.citations)


def test_generate_mode_abstains_with_the_fixed_phrase_when_nothing_is_supported(tmp_path: Path) -> None:
    with make(tmp_path, FakeChatModel([INVENTED]), answer_mode="generate") as rag:
        result = rag.ask(FIRST)
        assert rag.components.engine.metrics.value("anaphora_abstentions_total") == 1
    assert result.answer == ABSTAIN and result.trace.abstained and result.trace.answer_source == "abstain"


def test_extractive_mode_makes_no_answer_call_and_a_follow_up_uses_the_retrieval_query(tmp_path: Path) -> None:
    model = FakeChatModel()
    with make(tmp_path, model, answer_mode="extractive", rewriter="expansion") as rag:
        history = [
            Message(role="user", content="How do I install Kestrel on Kubernetes with Helm?"),
            Message(role="assistant", content="Use the Helm chart."),
        ]
        result = rag.ask("And on ARM?", history=history)
    assert model.calls == []  # no rewrite call (expansion) and no answer call
    assert result.trace.model_calls == 0 and result.trace.answer_source == "extractive"
    assert result.trace.query != "And on ARM?"  # the expansion brought Kubernetes in ...
    assert "arm" in result.answer.lower()  # ... and the quoted sentences are about ARM
    assert result.citations and result.citations[0].how == "cited"


def test_streaming_in_drop_mode_never_sends_the_dropped_unit(tmp_path: Path) -> None:
    also = "32-bit ARM (`linux/arm/v7`) images are not published."
    with make(tmp_path, FakeChatModel([f"{ARM} {INVENTED} {also}"], token_delay_s=0.001)) as rag:
        conversation = rag.new_conversation()
        *deltas, result = list(rag.stream("Which image tags exist for arm64 on Kubernetes?", conversation))
    assert "".join(deltas) == result.answer
    assert not any("systemctl" in d or "128.04k" in d for d in deltas)
    assert len(deltas) >= 2  # released unit by unit, not all at the end


def test_chit_chat_is_not_held_to_the_documents(tmp_path: Path) -> None:
    with make(tmp_path, FakeChatModel(["Hello! How can I help you with your documents?"])) as rag:
        result = rag.ask("hi")
    assert result.answer == "Hello! How can I help you with your documents?"


def test_extractive_mode_answers_turns_about_the_conversation_from_it(tmp_path: Path) -> None:
    """Chit-chat and requests about the conversation: no retrieval and no model call in the extractive mode."""
    with make(tmp_path, FakeChatModel(["never used"]), answer_mode="extractive") as rag:
        conversation = rag.new_conversation()
        hello = rag.ask("hi", conversation)
        first = rag.ask("How do I install Kestrel on Kubernetes?", conversation)
        again = rag.ask("say that again, shorter", conversation)
    assert hello.trace.answer_source == "conversation" and hello.trace.model_calls == 0
    stages = ["memory_epoch", "route", "memory", "budget", "converse", "cite"]  # no answer stage, no model call
    assert [s.name for s in hello.trace.stages] == stages
    assert first.trace.answer_source == "extractive"
    assert again.trace.retrieval_skipped and again.trace.model_calls == 0
    assert again.trace.answer_source == "conversation"
    assert again.answer and len(again.answer.split()) <= 30
    assert set(again.answer.split()) <= set(first.answer.replace("\n", " ").split()) | {"…"}


def test_a_request_about_the_conversation_reads_back_beyond_the_prompts_window(tmp_path: Path) -> None:
    """Flask's docs, read as a user: after ten turns "recap everything" left out the first topic, and "the first
    command you gave me" would have been the first in the window, because the conversation was read back only as
    far as the prompt's window (8 turns by default; 4 here)."""
    later = ["How much memory does the agent need?", "How do I set the log level?", "And TLS?", "How do I upgrade?"]
    with make(tmp_path, FakeChatModel(), answer_mode="extractive", history_turns=4) as rag:
        conversation = rag.new_conversation()
        for question in (FIRST, *later, "What about Windows?"):
            rag.ask(question, conversation)
        first = rag.ask("what was my first question?", conversation)
        assert first.answer == f"You asked: {FIRST}"
        assert first.trace.model_calls == 0
