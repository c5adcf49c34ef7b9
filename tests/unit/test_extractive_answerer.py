"""The extractive answerer quotes sentences that answer; a sentence that asks a question is never quoted."""

from __future__ import annotations

import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.pipeline.extractive import ExtractiveAnswerer
from anaphora.types import Passage

pytestmark = pytest.mark.unit


async def test_a_question_in_a_source_is_never_quoted_as_an_answer() -> None:
    faq = Passage(
        id="faq.md#1",
        text="How much disk does the Kestrel spool need? The Kestrel spool needs 2 GiB of free disk by default.",
    )
    memory = Passage(id="memory:1", text="How much disk does the Kestrel spool need on my nodes?")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "Kestrel spool disk", "How much disk does the Kestrel spool need?", [faq, memory]
    )
    assert answer is not None
    quoted = [point.text for point in answer.points]
    assert quoted == ["The Kestrel spool needs 2 GiB of free disk by default."]
    assert "?" not in answer.text


async def test_only_questions_give_no_answer() -> None:
    asked = Passage(id="memory:2", text="Which chart version should I run on ARM nodes?")
    answerer = ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0)
    assert await answerer.answer("chart version ARM", "Which chart version on ARM?", [asked]) is None
