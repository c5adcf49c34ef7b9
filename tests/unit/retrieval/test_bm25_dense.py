"""The two first-stage indexes on their own: BM25 (bm25s) and dense (exact matrix or HNSW graph)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anaphora.retrieval.bm25 import BM25Index, bm25_tokens
from anaphora.retrieval.dense import DenseIndex

pytestmark = pytest.mark.unit

TEXTS = [
    "The cat sat on the warm mat by the fire.",
    "Dogs chase cats through the park in the morning.",
    "Quantum chromodynamics describes the strong interaction between quarks.",
    "Install the package with pip and configure the data directory.",
]
KEYS = np.array([11, 22, 33, 44], dtype=np.int64)


@pytest.fixture(scope="module")
def bm25() -> BM25Index:
    return BM25Index.build(KEYS, TEXTS)


def unit_vectors(n: int, dim: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# -- BM25 ----------------------------------------------------------------------------------------------------


def test_bm25_tokens_stem_and_drop_stopwords():
    assert bm25_tokens(["The cats are running"]) == [["cat", "run"]]


def test_bm25_tokens_equal_what_bm25s_indexes():
    """Queries are tokenized by our own loop; it must give exactly the tokens bm25s's tokenizer gives the index."""
    import bm25s
    import Stemmer

    corpus = Path(__file__).parents[3] / "src" / "anaphora"
    texts = [line for path in sorted(corpus.rglob("*.py"))[:40] for line in path.read_text().splitlines()]
    texts += ["", "   ", "x86-64 ARM64 caf\u00e9 na\u00efve 3.14 v2 IPv6 a_b", "The And OF it's don't I'm"]
    expected = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False)
    assert bm25_tokens(texts) == expected
    assert len(texts) > 1000


@pytest.mark.parametrize("query", ["zebra xylophone", "the of and is", "", "!!!"])
def test_bm25_query_without_known_words_returns_nothing(bm25: BM25Index, query: str):
    assert bm25.search(query, 10) == []


def test_bm25_exact_match_ranks_first(bm25: BM25Index):
    results = bm25.search("quantum chromodynamics quarks", 4)
    assert results[0][0] == 33
    assert [key for key, _ in results] == [33]  # no other text shares a word, zero scores are dropped
    assert results[0][1] > 0


def test_bm25_scores_sorted_and_stemmed(bm25: BM25Index):
    results = bm25.search("cat", 10)
    assert {key for key, _ in results} == {11, 22}  # "cats" stems to "cat"
    scores = [score for _, score in results]
    assert scores == sorted(scores, reverse=True)
    assert all(isinstance(key, int) for key, _ in results)


def test_bm25_respects_k(bm25: BM25Index):
    assert len(bm25.search("cat", 1)) == 1
    assert len(bm25.search("the cat install quantum dogs", 100)) == 4


def test_bm25_save_load_roundtrip(bm25: BM25Index, tmp_path: Path):
    directory = tmp_path / "bm25"
    directory.mkdir()
    bm25.save(directory)
    loaded = BM25Index.load(directory)
    np.testing.assert_array_equal(loaded.keys, KEYS)
    for query in ("cat", "pip install configure", "quarks", "unknownword"):
        assert loaded.search(query, 4) == bm25.search(query, 4)


def test_bm25_empty_corpus_builds_searches_and_roundtrips(tmp_path: Path):
    index = BM25Index.build(np.empty(0, dtype=np.int64), [])
    assert index.search("cat", 5) == []
    directory = tmp_path / "empty-bm25"
    directory.mkdir()
    index.save(directory)
    assert BM25Index.load(directory).search("cat", 5) == []


# -- dense ---------------------------------------------------------------------------------------------------


def test_dense_exact_mode_finds_the_stored_vector():
    vectors = unit_vectors(200, 32)
    keys = np.arange(1000, 1200, dtype=np.int64)
    index = DenseIndex.build(keys, vectors, 32)
    assert index.graph is None and index.matrix is not None
    assert len(index) == 200
    for row in (0, 17, 199):
        results = index.search(vectors[row], 5)
        assert results[0][0] == 1000 + row
        assert results[0][1] == pytest.approx(1.0, abs=1e-5)
        scores = [s for _, s in results]
        assert scores == sorted(scores, reverse=True)
        # the exact scan agrees with brute force
        expected = np.argsort(-(vectors @ vectors[row]))[:5] + 1000
        assert [k for k, _ in results] == expected.tolist()


def test_dense_hnsw_mode_finds_the_stored_vector():
    vectors = unit_vectors(200, 32)
    keys = np.arange(5000, 5200, dtype=np.int64)
    index = DenseIndex.build(keys, vectors, 32, exact_below=1)
    assert index.graph is not None and index.matrix is None
    for row in range(200):
        key, score = index.search(vectors[row], 3)[0]
        assert key == 5000 + row
        assert score == pytest.approx(1.0, abs=1e-4)  # cosine similarity, not distance


def test_dense_hnsw_scores_are_cosine_similarities():
    vectors = unit_vectors(50, 16, seed=3)
    keys = np.arange(1, 51, dtype=np.int64)
    exact = DenseIndex.build(keys, vectors, 16)
    graph = DenseIndex.build(keys, vectors, 16, exact_below=1)
    query = unit_vectors(1, 16, seed=99)[0]
    exact_results = dict(exact.search(query, 5))
    for key, score in graph.search(query, 5):
        assert score == pytest.approx(float(vectors[key - 1] @ query), abs=1e-4)
        assert key in exact_results


@pytest.mark.parametrize("exact_below", [20_000, 1], ids=["exact", "hnsw"])
def test_dense_save_load_roundtrip(tmp_path: Path, exact_below: int):
    vectors = unit_vectors(120, 24, seed=5)
    keys = np.arange(300, 420, dtype=np.int64)
    index = DenseIndex.build(keys, vectors, 24, exact_below=exact_below)
    directory = tmp_path / "dense"
    index.save(directory)
    assert (directory / "hnsw.bin").exists() == (exact_below == 1)
    loaded = DenseIndex.load(directory, 24)
    assert (loaded.graph is not None) == (exact_below == 1)
    np.testing.assert_array_equal(loaded.keys, keys)
    for row in (0, 60, 119):
        assert loaded.search(vectors[row], 4) == index.search(vectors[row], 4)
        assert loaded.search(vectors[row], 1)[0][0] == 300 + row


def test_dense_k_larger_than_index_is_clipped():
    vectors = unit_vectors(3, 8)
    index = DenseIndex.build(np.array([1, 2, 3], dtype=np.int64), vectors, 8)
    assert len(index.search(vectors[0], 10)) == 3
    graph = DenseIndex.build(np.array([1, 2, 3], dtype=np.int64), vectors, 8, exact_below=1)
    assert len(graph.search(vectors[0], 10)) == 3


@pytest.mark.parametrize("vectors", [None, np.empty((0, 8), dtype=np.float32)])
def test_dense_empty_index(tmp_path: Path, vectors):
    index = DenseIndex.build(np.empty(0, dtype=np.int64), vectors, 8)
    assert len(index) == 0
    assert index.search(np.ones(8, dtype=np.float32), 5) == []
    index.save(tmp_path / "d")
    assert DenseIndex.load(tmp_path / "d", 8).search(np.ones(8, dtype=np.float32), 5) == []


@pytest.mark.parametrize("exact_below", [20_000, 1], ids=["exact", "hnsw"])
def test_search_many_equals_one_search_per_query(exact_below: int):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = DenseIndex.build(np.arange(300, dtype=np.int64) * 3, vectors, 16, exact_below=exact_below)
    queries = vectors[[5, 17, 250]] + 0.01
    batched = index.search_many(queries, 7)
    assert len(batched) == 3
    for query, ranking in zip(queries, batched, strict=True):
        single = index.search(query, 7)
        assert [k for k, _ in ranking] == [k for k, _ in single]
        assert np.allclose([s for _, s in ranking], [s for _, s in single], atol=1e-5)
    assert batched[0][0][0] == 15  # the query's own vector (key 5 * 3) ranks first
