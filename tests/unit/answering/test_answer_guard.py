"""RepetitionGuard: stop a looping / prompt-echoing model, and quote passages when nothing
usable remains."""

from __future__ import annotations

import asyncio

import pytest

from anaphora import Anaphora, FakeChatModel
from anaphora.answering.answer_guard import ANSWER_STOP, RepetitionGuard
from anaphora.answering.generate import generate
from anaphora.answering.support import strip_markers
from anaphora.models.base import ChatOptions
from anaphora.pipeline.engine import NO_ANSWER
from anaphora.types import Message

pytestmark = pytest.mark.unit

S1 = "The agent runs on every node."
S2 = "It ships the container logs to your outputs."


@pytest.mark.parametrize(
    "text",
    [
        "",
        S1,
        f"{S1} {S2}",
        f"{S1}\n{S2}\n",
        "Use Helm. Use Helm. Use Helm.",  # repeats shorter than five words are left alone
        f"{S1} {S2} Use the chart [install.md#2].",  # an inline citation is not a leaked label
        "The Question: field of the form is optional.",  # 'Question:' not at a line start
        f"{S1} {S1[:-1]}",  # the repeat is still being written: not judged yet
        f"{S1} {S1[:-1]} ",
    ],
)
def test_clean_or_unfinished_text_passes(text: str) -> None:
    guard = RepetitionGuard()
    assert guard.check(text) is None
    assert not guard.tripped


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"{S1} {S1}", S1),
        (f"{S1} {S2} {S1} more", f"{S1} {S2}"),
        (f"{S1}\n{S2}\n{S2}\n", f"{S1}\n{S2}"),
        (f"{S1} {S2} {S2.upper()}", f"{S1} {S2}"),  # case and punctuation do not hide a repeat
        (f"{S1} {S1[:-1]}!", S1),
        (f"{S1} {S1} {S1} {S1}", S1),
    ],
    ids=["twice", "later", "lines", "case", "punctuation", "loop"],
)
def test_repeated_sentence_is_cut(text: str, kept: str) -> None:
    guard = RepetitionGuard()
    assert guard.check(text) == kept
    assert guard.tripped


def test_unfinished_repeat_is_cut_once_it_is_finished() -> None:
    guard = RepetitionGuard()
    assert guard.check(f"{S1} {S1[:-1]}") is None
    assert guard.check(f"{S1} {S1}") == S1


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"{S1} <<<CONTEXT>>> [a#1] stuff", S1),
        (f"{S1}\n<<<END CONTEXT>>>", S1),
        (f"{S1} <<< end context >>>", S1),
        (f"{S1}\nQuestion: how do I install it?", S1),
        (f"{S1}\n  question: and on ARM?", S1),
        (f"{S1}\n[install.md#2] (install.md — Helm)\nhelm install kestrel", S1),
        ("[faq.md#1] (faq.md)\nKestrel is a log shipper.", ""),
        (f"{S1} {S2}\nQuestion: x {S1} {S1}", f"{S1} {S2}"),
    ],
    ids=["context", "end-context", "spaced-lowercase", "question", "question-indented", "label", "label-first", "both"],
)
def test_leaked_prompt_markup_is_cut(text: str, kept: str) -> None:
    guard = RepetitionGuard()
    assert guard.check(text) == kept
    assert guard.tripped


def test_answer_stop_sequences_cover_the_prompt_markup() -> None:
    assert "<<<" in ANSWER_STOP and "\nQuestion:" in ANSWER_STOP
    assert "<|im_start|>" in ANSWER_STOP and "<|im_end|>" in ANSWER_STOP


# --- generate() under the guard ----------------------------------------------------------------------------------

LOOPING = f"{S1} {S2} {S1} {S2} {S1}"


async def test_generate_cuts_a_looping_answer() -> None:
    model = FakeChatModel([LOOPING])
    generation = await generate(model, [Message(role="user", content="q")], ChatOptions(), None)
    assert generation.answer == f"{S1} {S2}"
    assert generation.guard.tripped


async def test_streamed_deltas_add_up_to_the_guarded_answer() -> None:
    model = FakeChatModel([LOOPING + " and on and on."])
    deltas: asyncio.Queue[str | None] = asyncio.Queue()
    generation = await generate(model, [Message(role="user", content="q")], ChatOptions(), deltas.put_nowait)
    answer, guard = generation.answer, generation.guard
    assert generation.first_token_ms is not None and generation.first_token_ms >= 0
    pieces = []
    while not deltas.empty():
        pieces.append(deltas.get_nowait())
    assert answer == f"{S1} {S2}"
    assert "".join(pieces) == answer
    assert guard.tripped


def test_engine_quotes_the_passages_when_the_model_only_echoes_the_prompt(
    sample_rag: Anaphora, fake_model: FakeChatModel
) -> None:
    fake_model.enqueue("<<<CONTEXT>>>\n[install-kubernetes.md#1] (install-kubernetes.md)\nKestrel runs ...")
    result = sample_rag.ask("How do I install Kestrel with Helm on Kubernetes?")
    assert "<<<" not in result.answer
    assert result.answer != NO_ANSWER
    ids = {p.id for p in result.trace.retrieved}
    assert any(f"[{pid}]" in result.answer for pid in ids)
    assert "quoted the best passages" in result.trace.stage("answer").detail


def test_engine_reports_a_cut_answer(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    fake_model.enqueue(f"{S1} {S1} {S1}")
    result = sample_rag.ask("How do I install Kestrel with Helm on Kubernetes?")
    assert strip_markers(result.answer) == S1
    assert "repeating" in result.trace.stage("answer").detail
