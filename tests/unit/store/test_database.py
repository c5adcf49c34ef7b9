"""The SQLite database (migrations, transactions), the embedding cache and the corpus tables."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anaphora.embeddings import CachedEmbedder, HashingEmbedder, cache_key
from anaphora.errors import StoreError
from anaphora.store import Database, SQLiteCorpus, SQLiteEmbeddingCache
from anaphora.store.sqlite_database import MIGRATIONS, NUMBERED
from anaphora.types import Chunk

pytestmark = pytest.mark.unit


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "store" / "anaphora.db")
    yield database
    database.close()


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def tables(db: Database) -> set[str]:
    return {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}


# -- migrations ----------------------------------------------------------------------------------------------


def test_database_migrates_on_open(db: Database, tmp_path: Path):
    assert {"meta", "documents", "chunks", "embedding_cache", "conversations", "turns"} <= tables(db)
    assert db.query("PRAGMA user_version")[0][0] == len(NUMBERED)
    assert db.query("PRAGMA foreign_keys")[0][0] == 1
    assert db.query("PRAGMA journal_mode")[0][0] == "wal"
    assert (tmp_path / "store").is_dir()  # the parent folder is created


def test_reopen_is_idempotent(tmp_path: Path):
    path = tmp_path / "a.db"
    first = Database(path)
    with first.transaction() as conn:
        Database.set_meta(conn, "marker", "kept")
    first.close()
    assert user_version(path) == len(NUMBERED)

    second = Database(path)  # would fail with "table meta already exists" if migrations re-ran
    try:
        assert second.get_meta("marker") == "kept"
        assert second.query("PRAGMA user_version")[0][0] == len(NUMBERED)
    finally:
        second.close()
    assert user_version(path) == len(NUMBERED)


def test_newer_schema_raises_store_error(tmp_path: Path):
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(NUMBERED) + 1}")
    conn.close()
    with pytest.raises(StoreError) as caught:
        Database(path)
    assert "newer" in caught.value.message
    assert caught.value.hint
    assert user_version(path) == len(NUMBERED) + 1  # left untouched


def test_unopenable_path_raises_store_error(tmp_path: Path):
    folder = tmp_path / "is_a_directory.db"
    folder.mkdir()
    with pytest.raises(StoreError) as caught:
        Database(folder)
    assert "cannot open the SQLite store" in caught.value.message
    assert "ANAPHORA_DATA_DIR" in (caught.value.hint or "")


def test_uncreatable_data_dir_raises_store_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError) as caught:
        Database(blocker / "sub" / "x.db")
    assert caught.value.hint


def test_in_memory_database():
    database = Database(":memory:")
    try:
        assert "chunks" in tables(database)
    finally:
        database.close()


# -- transactions --------------------------------------------------------------------------------------------


def test_transaction_commits(db: Database):
    with db.transaction() as conn:
        Database.set_meta(conn, "k", "v1")
        Database.set_meta(conn, "k", "v2")  # upsert
    assert db.get_meta("k") == "v2"
    assert db.get_meta("missing") is None


def test_transaction_rolls_back_on_exception(db: Database):
    with db.transaction() as conn:
        Database.set_meta(conn, "k", "before")

    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.transaction() as conn:
        Database.set_meta(conn, "k", "after")
        Database.set_meta(conn, "other", "x")
        assert conn.execute("SELECT value FROM meta WHERE key = 'k'").fetchone()[0] == "after"
        raise Boom

    assert db.get_meta("k") == "before"
    assert db.get_meta("other") is None
    # and the connection is usable afterwards (no transaction left open)
    with db.transaction() as conn:
        Database.set_meta(conn, "k", "later")
    assert db.get_meta("k") == "later"


# -- embedding cache -----------------------------------------------------------------------------------------


def test_embedding_cache_roundtrip(db: Database):
    cache = SQLiteEmbeddingCache(db)
    a = np.arange(4, dtype=np.float32)
    b = np.array([0.5, -0.25, 1e-3, 7.0], dtype=np.float64)  # stored as float32
    cache.put_many({"a": a, "b": b})
    found = cache.get_many(["a", "b", "missing"])
    assert set(found) == {"a", "b"}
    assert found["a"].dtype == np.float32
    np.testing.assert_array_equal(found["a"], a)
    np.testing.assert_allclose(found["b"], b.astype(np.float32))
    assert cache.get_many([]) == {}
    cache.put_many({})  # no-op


def test_embedding_cache_many_keys_batched(db: Database):
    cache = SQLiteEmbeddingCache(db)
    items = {f"k{i}": np.full(3, i, dtype=np.float32) for i in range(1203)}
    cache.put_many(items)
    found = cache.get_many(list(items))
    assert len(found) == 1203
    np.testing.assert_array_equal(found["k1202"], np.full(3, 1202, dtype=np.float32))


def test_embedding_cache_put_again_keeps_one_row(db: Database):
    cache = SQLiteEmbeddingCache(db)
    cache.put_many({"k": np.ones(2, dtype=np.float32)})
    cache.put_many({"k": np.ones(2, dtype=np.float32)})
    assert db.query("SELECT COUNT(*) AS n FROM embedding_cache")[0]["n"] == 1


def test_embedding_cache_survives_reopen(tmp_path: Path):
    path = tmp_path / "c.db"
    first = Database(path)
    SQLiteEmbeddingCache(first).put_many({"k": np.array([1.0, 2.0], dtype=np.float32)})
    first.close()
    second = Database(path)
    try:
        np.testing.assert_array_equal(SQLiteEmbeddingCache(second).get_many(["k"])["k"], [1.0, 2.0])
    finally:
        second.close()


class RecordingEmbedder(HashingEmbedder):
    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return super().embed(texts)


def test_cached_embedder_hits_and_misses(db: Database):
    inner = RecordingEmbedder(dim=64)
    embedder = CachedEmbedder(inner, SQLiteEmbeddingCache(db))
    first = embedder.embed(["alpha beta", "gamma delta", "alpha beta"])
    assert (embedder.hits, embedder.misses) == (0, 3)
    assert inner.calls == [["alpha beta", "gamma delta"]]  # duplicates embedded once
    np.testing.assert_allclose(first, HashingEmbedder(64).embed(["alpha beta", "gamma delta", "alpha beta"]))
    second = embedder.embed(["gamma delta", "new words"])
    assert (embedder.hits, embedder.misses) == (1, 4)
    assert inner.calls[1:] == [["new words"]]  # only the miss reaches the model
    assert embedder.embed(["alpha beta"]).shape == (1, 64)
    assert len(inner.calls) == 2  # a full hit never calls the model
    assert embedder.hits == 2
    np.testing.assert_allclose(second, HashingEmbedder(64).embed(["gamma delta", "new words"]))
    assert db.query("SELECT COUNT(*) AS n FROM embedding_cache")[0]["n"] == 3
    assert SQLiteEmbeddingCache(db).get_many([cache_key(inner.name, "new words")])
    assert embedder.embed([]).shape == (0, 64)


# -- corpus --------------------------------------------------------------------------------------------------


def chunk(cid: str, text: str, source: str = "a.md", ordinal: int = 1) -> Chunk:
    return Chunk(id=cid, text=text, source=source, heading="H", ordinal=ordinal)


def vectors(n: int, dim: int = 4) -> np.ndarray:
    return np.eye(n, dim, dtype=np.float32)


def test_corpus_replace_and_remove_bump_generation(db: Database):
    corpus = SQLiteCorpus(db)
    assert corpus.generation() == 0
    assert corpus.embedder() is None
    corpus.replace_document(
        "/r", "a.md", "h1", [chunk("a#1", "one"), chunk("a#2", "two", ordinal=2)], vectors(2), "emb"
    )
    assert corpus.generation() == 1
    assert corpus.embedder() == "emb"
    assert corpus.chunk_count() == 2
    corpus.replace_document("/r", "a.md", "h2", [chunk("a#1", "uno")], vectors(1), "emb")
    assert corpus.generation() == 2
    assert corpus.chunk_count() == 1
    [document] = corpus.documents()
    summary = (document.root, document.source, document.content_hash, document.chunk_count)
    assert summary == ("/r", "a.md", "h2", 1)
    assert corpus.remove_documents([]) == 0
    assert corpus.generation() == 2  # nothing removed, nothing bumped
    assert corpus.remove_documents([("/r", "a.md"), ("/r", "gone.md")]) == 1
    assert corpus.generation() == 3
    assert corpus.chunk_count() == 0
    assert corpus.documents() == []


def test_corpus_reads_back_chunks_and_vectors(db: Database):
    corpus = SQLiteCorpus(db)
    corpus.replace_document("/r", "a.md", "h", [chunk("a#1", "one"), chunk("a#2", "two", ordinal=2)], vectors(2), "emb")
    keys, texts = corpus.keys_and_texts()
    assert texts == ["H\none", "H\ntwo"]
    vkeys, matrix = corpus.keys_and_vectors()
    np.testing.assert_array_equal(keys, vkeys)
    np.testing.assert_array_equal(matrix, vectors(2))
    fetched = corpus.chunks([int(k) for k in keys])
    assert [fetched[int(k)].id for k in keys] == ["a#1", "a#2"]
    assert fetched[int(keys[0])].source == "a.md"
    assert corpus.chunks([]) == {}


def test_corpus_empty_vectors(db: Database):
    keys, matrix = SQLiteCorpus(db).keys_and_vectors()
    assert len(keys) == 0 and matrix is None


def test_replace_document_is_atomic(db: Database):
    corpus = SQLiteCorpus(db)
    corpus.replace_document("/r", "a.md", "h1", [chunk("a#1", "one")], vectors(1), "emb")
    generation = corpus.generation()
    with pytest.raises(ValueError):  # two chunks, one vector: zip(strict=True) fails mid-transaction
        corpus.replace_document("/r", "a.md", "h2", [chunk("a#1", "x"), chunk("a#2", "y")], vectors(1), "emb")
    assert corpus.generation() == generation
    assert [d.content_hash for d in corpus.documents()] == ["h1"]
    assert corpus.keys_and_texts()[1] == ["H\none"]


def test_taken_chunk_ids_ignores_the_same_document(db: Database):
    corpus = SQLiteCorpus(db)
    corpus.replace_document("/r", "a.jsonl", "h", [chunk("p1", "x"), chunk("p2", "y")], vectors(2), "emb")
    assert corpus.taken_chunk_ids(["p1", "p3"], "/r", "a.jsonl") == set()
    assert corpus.taken_chunk_ids(["p1", "p3"], "/r", "b.jsonl") == {"p1"}
    assert corpus.taken_chunk_ids(["p2"], "/other", "a.jsonl") == {"p2"}
    many = [f"n{i}" for i in range(1100)] + ["p2"]
    assert corpus.taken_chunk_ids(many, "/r", "b.jsonl") == {"p2"}


def test_steps_are_recorded_by_name_and_a_store_from_before_names_is_not_migrated_twice(tmp_path: Path):
    path = tmp_path / "store.db"
    first = Database(path)
    assert [r[0] for r in first.query("SELECT name FROM schema_migrations")] == MIGRATIONS.names
    with first.transaction() as conn:  # what a store written before steps were recorded by name looks like
        conn.execute("DROP TABLE schema_migrations")
        conn.execute("DROP TABLE feedback")  # steps added after names were recorded
        conn.execute("DROP INDEX turns_created")
        conn.execute("DROP TABLE source_pages")
        conn.execute("DROP TABLE sources")
        Database.set_meta(conn, "marker", "kept")
    first.close()
    second = Database(path)  # must not re-run the steps (they would fail: the tables exist)
    try:  # user_version counts in the numbering of then, memory's steps included (they are not run here)
        later = [name for name in MIGRATIONS.names if name not in NUMBERED]  # run now, recorded by name
        assert [r[0] for r in second.query("SELECT name FROM schema_migrations")] == [*NUMBERED, *later]
        assert set(MIGRATIONS.names) | MIGRATIONS.moved == set(NUMBERED) | set(later)
        assert second.get_meta("marker") == "kept"
    finally:
        second.close()


def test_a_recorded_step_this_code_does_not_know_is_refused(tmp_path: Path):
    path = tmp_path / "future.db"
    Database(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES ('m999_from_the_future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"newer Anaphora.*m999_from_the_future"):
        Database(path)
