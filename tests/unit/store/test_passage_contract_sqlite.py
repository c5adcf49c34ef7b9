"""The passage-store contract (anaphora.testing.passage_contract) run against the embedded backend: the SQLite
corpus as the document registry, BM25 + the dense index (exact scan, and the HNSW graph) as the passage index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.retrieval import EmbeddedPassageIndex, IndexCache
from anaphora.store import Database, SQLiteCorpus
from anaphora.testing.passage_contract import PassageStoreContract

pytestmark = pytest.mark.unit


class TestEmbeddedPassageStoreContract(PassageStoreContract):
    @pytest.fixture
    def stores(self, tmp_path: Path) -> Iterator[tuple[SQLiteCorpus, EmbeddedPassageIndex]]:
        database = Database(tmp_path / "anaphora.db")
        corpus = SQLiteCorpus(database)
        yield corpus, EmbeddedPassageIndex(corpus, IndexCache(corpus, tmp_path / "index", "hashing-384", 384))
        database.close()


class TestEmbeddedHnswPassageStoreContract(PassageStoreContract):
    """The same rules when the dense index is the hnswlib graph (used above 20,000 passages)."""

    @pytest.fixture
    def stores(self, tmp_path: Path) -> Iterator[tuple[SQLiteCorpus, EmbeddedPassageIndex]]:
        database = Database(tmp_path / "anaphora.db")
        corpus = SQLiteCorpus(database)
        indexes = IndexCache(corpus, tmp_path / "index", "hashing-384", 384, exact_below=1)
        yield corpus, EmbeddedPassageIndex(corpus, indexes)
        database.close()

    def test_the_graph_is_what_answers(self, index: EmbeddedPassageIndex, ingested: Path) -> None:
        assert index.indexes.get().dense.graph is not None
