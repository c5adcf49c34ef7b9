"""The extractive answerer's vectors: passage sentences embedded once per process (bounded), memories' sentences
kept per user, out of the shared cache, and dropped when the user is erased; the same vectors either way."""

from __future__ import annotations

import numpy as np
import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.answering.extractive import quotable_spans
from anaphora.answering.sentence_vectors import SentenceVectors
from anaphora.app import erase_memory
from anaphora.embeddings.base import cache_key
from anaphora.embeddings.hashing import HashingEmbedder
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen += list(texts)
        return super().embed(texts)


def test_passage_sentences_are_embedded_once_and_memories_once_per_user() -> None:
    shared, personal = Counting(), Counting()
    vectors = SentenceVectors(shared, personal)
    passages = ["The compactor deletes old chunks.", "Retention is set per tenant."]
    asked, first = vectors.turn(["retention?"], passages, ["I run Loki 3.1."], user="alice")
    _, again = vectors.turn(["retention?"], passages, ["I run Loki 3.1."], user="alice")
    vectors.turn(["retention?"], passages, ["I run Loki 3.1."], user="bob")  # never served another user's entry
    assert shared.seen == [
        "retention?",
        *passages,
        "retention?",
        "retention?",
    ]  # the passages once, the query each turn
    assert personal.seen == ["I run Loki 3.1.", "I run Loki 3.1."]  # once for alice, once for bob
    assert np.allclose(first, again) and first.shape == (3, 384) and asked.shape == (1, 384)
    assert np.allclose(first, HashingEmbedder().embed([*passages, "I run Loki 3.1."]))
    assert (vectors.hits, vectors.misses) == (4, 2)
    assert vectors.held("alice") == 1 and vectors.forget_user("alice") == 1 and vectors.held("alice") == 0
    personal.seen.clear()
    vectors.turn([], [], ["I run Loki 3.1."], user="alice")
    vectors.turn([], [], ["I run Loki 3.1."], user="bob")
    assert personal.seen == ["I run Loki 3.1."]  # alice's was dropped, bob's kept


@pytest.mark.parametrize("erase", ["user", "memory"])  # erase the user, or only their memory (DELETE /v1/memories)
def test_a_users_memory_sentences_never_reach_the_shared_cache_and_erase_drops_them(tmp_path, erase: str) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        answer_mode="extractive",
        memory_min_score=0.0,
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        rag.ingest([SAMPLE_DOCS])
        first = rag.new_conversation(user_id="alice")
        rag.ask("My cluster is called nebula-seven. It runs Kestrel on ARM64 nodes.", first, user_id="alice")
        rag.settle()
        second = rag.new_conversation(user_id="alice")
        asked = rag.ask("how do I install Kestrel on my ARM64 cluster nebula-seven?", second, user_id="alice")
        rag.settle()
        recalled = [m.text for m in asked.trace.memory if m.injected]
        assert any("nebula-seven" in text for text in recalled)  # the memory's sentences were candidates
        sentences = {span[2] for text in recalled for span in quotable_spans(text)}
        components = rag.components
        keys = [cache_key(components.embedder.name, sentence) for sentence in sentences]
        assert len(sentences) >= 2 and components.embedder.cache.get_many(keys) == {}
        assert components.sentence_vectors.held("alice") >= 2  # in this process's memo instead, for alice only
        if erase == "user":
            rag.erase_user("alice")
        else:
            rag.run(erase_memory(components, "alice"))
        assert components.sentence_vectors.held("alice") == 0


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
