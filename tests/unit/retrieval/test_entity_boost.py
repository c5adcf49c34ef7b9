"""Entity boosting: which words are the conversation's entities, and how much a mention moves a passage."""

from __future__ import annotations

import numpy as np
import pytest

from anaphora.pipeline.stages import BoostEntities
from anaphora.retrieval.bm25 import BM25Index
from anaphora.retrieval.entity_boost import boost, conversation_entities, name_like
from anaphora.testing.stages import run_stage, turn_state
from anaphora.types import Message, Passage

pytestmark = pytest.mark.unit


def corpus() -> BM25Index:
    """A hundred passages: "Service" and "Tell" in every one; "k3s" in two; "Helm" in five."""
    texts = []
    for i in range(100):
        extra = " k3s cluster" if i < 2 else (" Helm chart" if i < 7 else "")
        texts.append(f"Tell the Service team about item{i}{extra}")
    return BM25Index.build(np.arange(100), texts)


def passage(pid: str, text: str, score: float) -> Passage:
    return Passage(id=pid, text=text, source="doc.md", score=score)


def test_name_like_words_are_capitalised_inside_a_sentence_all_capitals_or_with_digits():
    text = "Tell me how I run k3s on a Raspberry Pi4. What does the IRA say? Install Helm."
    assert name_like(text) == ["k3s", "Raspberry", "Pi4", "IRA", "Helm"]


def test_only_names_rare_in_the_corpus_are_entities_and_rarer_weighs_more():
    history = [Message(role="user", content="Please Tell the Service people I use k3s and Helm.")]
    entities = conversation_entities("And the upgrade?", history, corpus())
    names = {e.name: e.weight for e in entities}
    assert set(names) == {"k3s", "Helm"}  # "Tell" and "Service" are capitalised, but every passage says them
    assert names["k3s"] > names["Helm"]
    assert conversation_entities("And the upgrade?", history, None) == []


def test_the_boost_is_damped_and_reorders_without_adding():
    entities = conversation_entities("what about k3s and Helm?", [], corpus())
    passages = [
        passage("a", "nothing relevant here", 0.95),
        passage("b", "a k3s cluster", 0.9),
        passage("c", "a Helm chart for k3s", 0.8),
    ]
    ranked = boost(passages, entities, 0.3)
    assert [p.id for p in ranked] == ["b", "c", "a"]  # both names lift c, but less than twice one name
    scores = {p.id: p.score for p in ranked}
    assert scores["a"] == 0.95
    assert 0.9 < scores["b"] < 0.9 * 1.3 and 0.8 * 1.2 < scores["c"] < 0.8 * 1.3
    assert boost(passages, entities, 0.0) == passages
    assert boost(passages, [], 0.3) == passages


async def test_the_stage_traces_its_entities_and_skips_without_any():
    index = corpus()
    stage = BoostEntities(lambda: index, 0.2)
    history = (Message(role="user", content="I run k3s at home"),)
    candidates = (passage("a", "nothing", 1.0), passage("b", "k3s", 0.95))
    state, record = await run_stage(stage, turn_state("and the upgrade?", history=history, candidates=candidates))
    assert record.status == "ok" and "k3s" in record.detail
    assert [p.id for p in state.candidates] == ["b", "a"]
    state, record = await run_stage(stage, turn_state("and the upgrade?", candidates=candidates))
    assert record.status == "skipped"
    assert state.candidates == candidates
