"""The persistent embedding cache: bounded with LRU eviction, shared by ingestion and queries, and never the only
copy of a corpus vector."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anaphora import Anaphora
from anaphora.embeddings import CachedEmbedder, HashingEmbedder, cache_key
from anaphora.store import sqlite_embedding_cache as embedding_cache
from anaphora.store.sqlite_corpus import search_text
from anaphora.store.sqlite_database import Database
from anaphora.store.sqlite_embedding_cache import TRIM_EVERY, SQLiteEmbeddingCache
from anaphora.testing.embedding_cache_contract import EmbeddingCacheContract
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

DIM = 4


class Clock:
    """A monotonically increasing stand-in for time.time(), so 'least recently used' is unambiguous."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1_000_000)

    def time(self) -> float:
        return float(next(self._ticks))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(embedding_cache, "time", fake)
    return fake


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "cache.db")
    yield database
    database.close()


def vec(i: int) -> np.ndarray:
    return np.full(DIM, float(i), dtype=np.float32)


def key(i: int) -> str:
    return f"k{i:05d}"


def put_range(cache: SQLiteEmbeddingCache, start: int, stop: int, batch: int = 100) -> None:
    for lo in range(start, stop, batch):
        cache.put_many({key(i): vec(i) for i in range(lo, min(stop, lo + batch))})


def stored_keys(db: Database) -> set[str]:
    return {r["key"] for r in db.query("SELECT key FROM embedding_cache")}


def test_round_trip_and_misses_are_absent(db: Database) -> None:
    cache = SQLiteEmbeddingCache(db)
    cache.put_many({"a": vec(1), "b": np.arange(DIM, dtype=np.float64)})
    found = cache.get_many(["a", "b", "nope"])
    assert set(found) == {"a", "b"}
    assert found["a"].dtype == np.float32
    np.testing.assert_array_equal(found["b"], np.arange(DIM, dtype=np.float32))
    assert cache.get_many([]) == {}
    cache.put_many({})
    assert len(cache) == 2


def test_get_many_handles_more_keys_than_one_sql_batch(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_cache, "TRIM_EVERY", 10**9)
    cache = SQLiteEmbeddingCache(db, max_entries=10_000)
    put_range(cache, 0, 1200, batch=1200)
    found = cache.get_many([key(i) for i in range(1200)] + ["missing"])
    assert len(found) == 1200
    np.testing.assert_array_equal(found[key(1199)], vec(1199))


def test_trim_keeps_max_entries_and_evicts_least_recently_used(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding_cache, "TRIM_EVERY", 10**9)  # only the explicit trim() below
    cache = SQLiteEmbeddingCache(db, max_entries=1000)
    put_range(cache, 0, 1300)  # 13 writes of 100, each at a later time
    assert len(cache) == 1300
    # the first 100 entries written are read again: now they are the most recently used
    recent = [key(i) for i in range(100)]
    assert len(cache.get_many(recent)) == 100
    assert cache.trim() == 300
    assert len(cache) == 1000
    kept = stored_keys(db)
    assert set(recent) <= kept  # read recently: kept although written first
    assert not {key(i) for i in range(100, 400)} & kept  # the least recently used went
    assert {key(i) for i in range(400, 1300)} <= kept
    assert cache.trim() == 0  # nothing more to do


def test_rewriting_an_entry_refreshes_it(db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_cache, "TRIM_EVERY", 10**9)
    cache = SQLiteEmbeddingCache(db, max_entries=1000)
    cache.put_many({key(0): vec(0)})
    cache.put_many({key(1): vec(1)})
    put_range(cache, 2, 1001)
    cache.put_many({key(0): vec(0)})  # the oldest, written again
    assert cache.trim() == 1
    assert key(0) in stored_keys(db) and key(1) not in stored_keys(db)


def test_trimming_happens_automatically_every_trim_every_writes(db: Database, clock: Clock) -> None:
    cache = SQLiteEmbeddingCache(db, max_entries=1000)
    sizes = []
    for lo in range(0, 3000, 100):
        cache.put_many({key(i): vec(i) for i in range(lo, lo + 100)})
        sizes.append(len(cache))
    # never more than max_entries plus the writes between two size checks
    assert max(sizes) <= 1000 + TRIM_EVERY
    assert max(sizes) > 1000  # checks are not made on every write
    assert len(cache) < 3000
    # whatever was trimmed, the newest writes survive
    assert {key(i) for i in range(2900, 3000)} <= stored_keys(db)
    cache.trim()
    assert len(cache) == 1000
    assert stored_keys(db) == {key(i) for i in range(2000, 3000)}


def test_a_write_larger_than_the_cache_trims_at_once(db: Database, clock: Clock) -> None:
    cache = SQLiteEmbeddingCache(db, max_entries=1000)
    cache.put_many({key(i): vec(i) for i in range(1200)})
    assert len(cache) == 1000


def test_trim_every_counts_writes_since_the_last_trim(db: Database, clock: Clock) -> None:
    SQLiteEmbeddingCache(db, max_entries=10**6).put_many({key(i): vec(i) for i in range(1200)})
    cache = SQLiteEmbeddingCache(db, max_entries=1000)  # a new process: its write count starts at zero
    put_range(cache, 1200, 1200 + TRIM_EVERY - 1, batch=TRIM_EVERY // 4)
    assert len(cache) == 1200 + TRIM_EVERY - 1  # no check yet, however many calls
    cache.put_many({key(99_999): vec(0)})  # the write that reaches TRIM_EVERY
    assert len(cache) == 1000
    assert key(99_999) in stored_keys(db)


# -- CachedEmbedder --------------------------------------------------------------------------------------------------
class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=16)
        self.embedded: list[str] = []

    def embed(self, texts):
        self.embedded.extend(texts)
        return super().embed(texts)


def test_cached_embedder_counts_hits_and_misses_and_embeds_misses_once(db: Database) -> None:
    inner = CountingEmbedder()
    embedder = CachedEmbedder(inner, SQLiteEmbeddingCache(db))
    first = embedder.embed(["alpha beta", "gamma delta", "alpha beta"])
    assert (embedder.hits, embedder.misses) == (0, 3)
    assert inner.embedded == ["alpha beta", "gamma delta"]  # a duplicate in one call is embedded once
    np.testing.assert_array_equal(first[0], first[2])
    second = embedder.embed(["gamma delta", "epsilon zeta", "alpha beta"])
    assert (embedder.hits, embedder.misses) == (2, 4)
    assert inner.embedded == ["alpha beta", "gamma delta", "epsilon zeta"]
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    np.testing.assert_allclose(second, inner.embed(["gamma delta", "epsilon zeta", "alpha beta"]), rtol=1e-6)
    assert second.dtype == np.float32 and second.shape == (3, 16)
    assert embedder.embed([]).shape == (0, 16)
    assert embedder.name == inner.name and embedder.dim == inner.dim


def test_cache_keys_depend_on_the_embedder(db: Database) -> None:
    cache = SQLiteEmbeddingCache(db)
    small = CachedEmbedder(HashingEmbedder(dim=8), cache)
    large = CachedEmbedder(HashingEmbedder(dim=16), cache)
    assert small.embed(["same text"]).shape == (1, 8)
    assert large.embed(["same text"]).shape == (1, 16)  # not the 8-dim vector from the other embedder
    assert large.misses == 1 and large.hits == 0
    assert cache_key("a", "text") != cache_key("b", "text")
    assert cache_key("a", "text") == cache_key("a", "text")


def test_ingestion_and_queries_share_the_cache(rag: Anaphora) -> None:
    embedder = rag.components.embedder
    rag.ingest([SAMPLE_DOCS])
    chunks = rag.components.corpus.chunks(list(range(1, 4)))
    assert chunks
    hits, misses = embedder.hits, embedder.misses
    assert misses > 0  # ingestion filled the cache
    embedder.embed([search_text(c.heading, c.text) for c in chunks.values()])
    assert embedder.hits == hits + len(chunks)
    assert embedder.misses == misses
    # a question asked twice in a stored conversation is embedded once
    conversation = rag.new_conversation()
    rag.ask("How do I install Kestrel on Kubernetes?", conversation)
    misses = embedder.misses
    rag.ask("How do I install Kestrel on Kubernetes?", rag.new_conversation())
    assert embedder.misses == misses
    # a turn stored nowhere reads the cache but leaves nothing in it (erase could not name it)
    rag.ask("How do I install Kestrel on a quokka?")
    misses = embedder.misses
    rag.ask("How do I install Kestrel on a quokka?")
    assert embedder.misses > misses
    assert not embedder.cache.get_many([cache_key(embedder.name, "How do I install Kestrel on a quokka?")])


def test_re_ingesting_after_a_forced_rebuild_embeds_nothing_new(rag: Anaphora) -> None:
    embedder = rag.components.embedder
    rag.ingest([SAMPLE_DOCS])
    misses = embedder.misses
    report = rag.ingest([SAMPLE_DOCS], force=True)
    assert report.chunks_written > 0
    assert embedder.misses == misses


def test_corpus_vectors_survive_cache_eviction(rag: Anaphora) -> None:
    components = rag.components
    rag.ingest([SAMPLE_DOCS])
    before = rag.ask("How do I install Kestrel on Kubernetes?")
    cache = components.embedder.cache
    assert isinstance(cache, SQLiteEmbeddingCache)
    assert len(cache) >= components.corpus.chunk_count()
    # evict everything (below the settings' minimum, on purpose), and drop the derived search indexes too
    cache.max_entries = 0
    cache.trim()
    assert len(cache) == 0
    shutil.rmtree(components.settings.data_dir / "index")
    components.passages.indexes._current = None
    misses = components.embedder.misses
    after = rag.ask("How do I install Kestrel on Kubernetes?")
    # the indexes were rebuilt from the chunk table: only the question had to be embedded again, and the turn's
    # episode in long-term memory (its vector is of the turn with the previous one, a new text)
    assert components.embedder.misses == misses + 2
    assert [p.id for p in after.trace.retrieved] == [p.id for p in before.trace.retrieved]
    assert [p.dense_score for p in after.trace.retrieved] == pytest.approx(
        [p.dense_score for p in before.trace.retrieved]
    )
    assert after.answer == before.answer


def test_settings_bound_the_cache(rag: Anaphora) -> None:
    cache = rag.components.embedder.cache
    assert isinstance(cache, SQLiteEmbeddingCache)
    assert cache.max_entries == rag.settings.stores.embedding_cache_entries


class TestSQLiteEmbeddingCacheContract(EmbeddingCacheContract):
    @pytest.fixture
    def cache(self, db: Database) -> SQLiteEmbeddingCache:
        return SQLiteEmbeddingCache(db, max_entries=10_000)


def test_the_eviction_query_runs_only_when_the_cache_may_be_full(db: Database, clock: Clock, monkeypatch) -> None:
    # issue 16: a trim (which sorts the whole table) after every batch made ingesting 100k chunks quadratic
    cache = SQLiteEmbeddingCache(db, max_entries=1000)
    trims = []
    real_trim = cache.trim
    monkeypatch.setattr(cache, "trim", lambda: trims.append(len(cache)) or real_trim())
    for lo in range(0, 900, 100):
        cache.put_many({key(i): vec(i) for i in range(lo, lo + 100)})
    assert trims == []  # 900 rows at most: nothing to evict, so no query for it
    for lo in range(900, 1500, 100):
        cache.put_many({key(i): vec(i) for i in range(lo, lo + 100)})
    assert trims and len(cache) <= 1000 + TRIM_EVERY
