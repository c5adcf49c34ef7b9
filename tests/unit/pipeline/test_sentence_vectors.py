"""The extractive answerer's vectors: passage sentences embedded once per process (bounded), memories' sentences
never cached, the same vectors either way."""

from __future__ import annotations

import numpy as np
import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.pipeline.sentence_vectors import SentenceVectors

pytestmark = pytest.mark.unit


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen += list(texts)
        return super().embed(texts)


def test_passage_sentences_are_embedded_once_and_memories_every_time() -> None:
    shared, personal = Counting(), Counting()
    vectors = SentenceVectors(shared, personal)
    passages = ["The compactor deletes old chunks.", "Retention is set per tenant."]
    asked, first = vectors.turn(["retention?"], passages, ["I run Loki 3.1."])
    _, again = vectors.turn(["retention?"], passages, ["I run Loki 3.1."])
    assert shared.seen == ["retention?", *passages, "retention?"]  # the passages once, the query each turn
    assert personal.seen == ["I run Loki 3.1.", "I run Loki 3.1."]
    assert np.allclose(first, again) and first.shape == (3, 384) and asked.shape == (1, 384)
    assert np.allclose(first, HashingEmbedder().embed([*passages, "I run Loki 3.1."]))
    assert (vectors.hits, vectors.misses) == (2, 2)


def test_the_memo_is_bounded_least_recently_used_first() -> None:
    embedder = Counting()
    vectors = SentenceVectors(embedder, max_entries=2)
    vectors.turn([], ["one sentence here", "two sentence here"])
    vectors.turn([], ["one sentence here", "three sentence here"])  # "two" is the least recently used
    embedder.seen.clear()
    vectors.turn([], ["one sentence here", "two sentence here", "three sentence here"])
    assert embedder.seen == ["two sentence here"]


def test_no_sentences_gives_an_empty_matrix() -> None:
    asked, sentences = SentenceVectors(HashingEmbedder()).turn(["q"], [])
    assert asked.shape == (1, 384) and sentences.shape == (0, 384)
