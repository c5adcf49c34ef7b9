"""PostgreSQL document registry and passage index: pgvector (HNSW, cosine) for dense search, full-text search for
lexical search, both in the one ``passages`` table so every replica searches the same corpus.

It implements :class:`~anaphora.store.protocols.DocumentRegistry` and
:class:`~anaphora.store.protocols.PassageIndex` (the contract suite :mod:`anaphora.testing.passage_contract` runs
against it and against the embedded backend). The retriever fuses the two lists with the same weighted RRF as the
embedded backend, so only the lists differ: pgvector's HNSW graph (m = 16, ef_construction = 200, like the
embedded hnswlib graph; ``hnsw.ef_search`` from settings) instead of an exact scan, and ``ts_rank`` over a
generated ``tsvector`` column (GIN index) instead of BM25. A query's words are OR-ed (``websearch_to_tsquery`` of
``word or word ...``), because a plain ``plainto_tsquery`` ANDs them and a natural question then rarely matches.
``ts_rank`` rather than ``ts_rank_cd``: cover density rewards query words found close together, which an OR of
single words never asks for; on the clapnq follow-ups (reference rewrites) ``ts_rank`` reaches BM25's Recall@5
(0.246 vs 0.240) where ``ts_rank_cd`` gets 0.123 (bench/passage_index.py, docs/benchmarks.md).

The schema is created on first use by numbered migrations recorded in ``corpus_migrations``. The vector dimension
and the text search configuration are fixed when the ``passages`` table is created (recorded in ``corpus_meta``);
opening it later with another embedder dimension or configuration is refused with a hint. Text cannot hold NUL
characters in PostgreSQL: they are stored as U+FFFD, as in the conversation store.

The driver is synchronous (``psycopg`` with a ``psycopg_pool.ConnectionPool``): ingestion is synchronous,
CPU-bound work that already runs in a worker thread, and the retriever calls the searches from one, so an async
pool would only add a second event loop. Needs the ``postgres`` extra: ``pip install 'anaphora[postgres]'``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from anaphora.errors import ConfigurationError, PassageIdTakenError, StoreError, require
from anaphora.store.migrations import Migrations, PostgresLedger, migrate_now
from anaphora.store.postgres_conversations import _text
from anaphora.store.postgres_pool import VECTOR_EXTENSION, connection_error, vector_extension_error
from anaphora.store.protocols import DocumentVersion, Ranking, StoredDocument, check_dimension, embedder_mismatch
from anaphora.store.sqlite_corpus import search_text
from anaphora.types import Chunk

_MIGRATION_LOCK = 0x616E6171  # pg_advisory_xact_lock key of the corpus schema (the conversations use ...70)
_EXTENSION = VECTOR_EXTENSION
_WORD = re.compile(r"\w+")
_OPERATOR_WORDS = {"or", "and"}  # websearch_to_tsquery would read "or" as the operator
_RESET_HINT = (
    "point ANAPHORA_POSTGRES_URL at another database, or drop the tables documents, passages, corpus_meta and "
    "corpus_migrations there, and ingest again"
)


@dataclass(frozen=True)
class Layout:
    """What the ``passages`` table is created for; fixed once it exists."""

    dim: int
    text_search_config: str


Migration = Callable[[Any, Layout], None]
MIGRATIONS: Migrations[Migration] = Migrations(
    "the PostgreSQL passage store", hint="upgrade Anaphora, or point ANAPHORA_POSTGRES_URL at another database"
)
migration = MIGRATIONS  # the decorator that registers a step


@migration
def m001_documents_and_passages(conn: Any, layout: Layout) -> None:
    from psycopg import sql

    conn.execute("CREATE TABLE corpus_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        "INSERT INTO corpus_meta (key, value) VALUES ('dim', %s), ('text_search_config', %s)",
        (str(layout.dim), layout.text_search_config),
    )
    conn.execute(
        "CREATE TABLE documents (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, root TEXT NOT NULL, "
        "source TEXT NOT NULL, content_hash TEXT NOT NULL, chunk_count INTEGER NOT NULL, "
        "ingested_at TIMESTAMPTZ NOT NULL, UNIQUE (root, source))"
    )
    conn.execute("CREATE INDEX documents_source ON documents (source)")
    conn.execute(
        sql.SQL(
            "CREATE TABLE passages (key BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
            "document_id BIGINT NOT NULL REFERENCES documents (id) ON DELETE CASCADE, ordinal INTEGER NOT NULL, "
            "heading TEXT NOT NULL, text TEXT NOT NULL, embedding vector({dim}) NOT NULL, "
            "search tsvector GENERATED ALWAYS AS (to_tsvector({config}::regconfig, heading || ' ' || text)) STORED)"
        ).format(dim=sql.Literal(layout.dim), config=sql.Literal(layout.text_search_config))
    )
    conn.execute("CREATE INDEX passages_document ON passages (document_id)")
    conn.execute(
        "CREATE INDEX passages_embedding ON passages USING hnsw (embedding vector_cosine_ops) "
        "WITH (m = 16, ef_construction = 200)"
    )
    conn.execute("CREATE INDEX passages_search ON passages USING gin (search)")


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form, ``[x,y,...]``, with float32 values written exactly."""
    return "[" + ",".join(map(str, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def any_word_query(text: str) -> str:
    """``text``'s words joined by ``or`` for ``websearch_to_tsquery``: any word may match, as in BM25."""
    return " or ".join(w for w in _WORD.findall(text) if w.lower() not in _OPERATOR_WORDS)


_DENSE = """
SELECT q.n, p.key, 1 - p.distance
FROM unnest(%(vectors)s::text[]) WITH ORDINALITY AS q (v, n),
LATERAL (SELECT key, embedding <=> q.v::vector AS distance FROM passages
         ORDER BY embedding <=> q.v::vector LIMIT %(k)s) AS p
ORDER BY q.n, p.distance, p.key
"""

_LEXICAL = """
SELECT q.n, p.key, p.score
FROM unnest(%(queries)s::text[]) WITH ORDINALITY AS q (text, n),
LATERAL (SELECT passages.key, ts_rank(passages.search, query) AS score
         FROM websearch_to_tsquery(%(config)s::regconfig, q.text) AS query, passages
         WHERE passages.search @@ query ORDER BY score DESC, passages.key LIMIT %(k)s) AS p
ORDER BY q.n, p.score DESC, p.key
"""

_SIMILARITY = """
SELECT x.n, p.key, 1 - (p.embedding <=> q.v::vector)
FROM unnest(%(ns)s::bigint[], %(keys)s::bigint[]) AS x (n, key)
JOIN unnest(%(vectors)s::text[]) WITH ORDINALITY AS q (v, n) ON q.n = x.n
JOIN passages p ON p.key = x.key
"""


_NEIGHBOURS = """
SELECT a.id, p.id, p.ordinal, p.heading, p.text, d.source
FROM passages a
JOIN passages p ON p.document_id = a.document_id AND p.key <> a.key
  AND p.ordinal BETWEEN a.ordinal - %(span)s AND a.ordinal + %(span)s
JOIN documents d ON d.id = a.document_id
WHERE a.id = ANY(%(ids)s)
ORDER BY a.id, p.ordinal, p.key
"""


def _rankings(rows: Iterable[tuple[int, int, float]], count: int) -> list[Ranking]:
    """Rows of (1-based query number, key, score) as one ranking per query."""
    rankings: list[Ranking] = [[] for _ in range(count)]
    for n, key, score in rows:
        rankings[n - 1].append((int(key), float(score)))
    return rankings


class PostgresPassageStore:
    """Documents, passages and their vectors in PostgreSQL with pgvector. Construction is cheap and does not
    connect; the pool opens (and the schema is migrated) on first use or :meth:`warm_up`. Close with :meth:`close`.

    ``dim`` may be a callable, so that the embedder is loaded only when the store is first used.
    """

    def __init__(
        self,
        url: str,
        *,
        embedder_name: str,
        dim: int | Callable[[], int],
        text_search_config: str = "english",
        ef_search: int = 128,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = 30.0,
    ) -> None:
        purpose = "the PostgreSQL passage store"
        require("psycopg", package="psycopg[binary]", extra="postgres", purpose=purpose)
        pool_module = require("psycopg_pool", package="psycopg-pool", extra="postgres", purpose=purpose)
        if not url:
            raise StoreError(
                "the PostgreSQL passage store needs a connection URL",
                hint="set ANAPHORA_POSTGRES_URL, e.g. postgresql://user:password@host:5432/anaphora",
            )
        self.embedder_name = embedder_name
        self.text_search_config = text_search_config
        self.timeout_s = timeout_s
        self._dim = dim
        self.pool = pool_module.ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            open=False,
            kwargs={"autocommit": True},
            configure=lambda conn: conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),)),
        )
        self._opened = False
        self._open_lock = threading.Lock()

    @property
    def dim(self) -> int:
        if callable(self._dim):
            self._dim = self._dim()
        return self._dim

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Open the pool and bring the schema up to date; safe to call more than once, from any thread."""
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            import psycopg
            import psycopg_pool

            try:
                self.pool.open(wait=True, timeout=self.timeout_s)
            except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as exc:
                self.pool.close()
                raise connection_error("the PostgreSQL passage store", exc) from exc
            try:
                self._migrate(Layout(self.dim, self.text_search_config))
            except BaseException:
                self.pool.close()
                raise
            self._opened = True

    def close(self) -> None:
        self.pool.close()
        self._opened = False

    def term_statistics(self) -> None:
        return None  # PostgreSQL's full-text index gives no cheap per-token document frequencies

    def _connection(self):
        self.warm_up()
        return self.pool.connection()

    def _migrate(self, layout: Layout) -> None:
        import psycopg

        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            try:
                conn.execute("SELECT %s::regconfig", (layout.text_search_config,))
            except psycopg.errors.UndefinedObject as exc:
                raise ConfigurationError(
                    f"PostgreSQL has no text search configuration {layout.text_search_config!r}",
                    hint="set ANAPHORA_POSTGRES_TEXT_SEARCH_CONFIG to one that `\\dF` in psql lists, e.g. english",
                ) from exc
            self._create_vector_extension(conn)
            migrate_now(MIGRATIONS, PostgresLedger(conn, "corpus_migrations", lambda step: step(conn, layout)))
            meta = dict(conn.execute("SELECT key, value FROM corpus_meta").fetchall())
        if int(meta["dim"]) != layout.dim:
            raise ConfigurationError(
                f"the passages in PostgreSQL have {meta['dim']}-dimensional vectors but the embedder "
                f"{self.embedder_name!r} gives {layout.dim}",
                hint=f"set ANAPHORA_EMBEDDER back to the one the documents were ingested with, or {_RESET_HINT}",
            )
        if meta["text_search_config"] != layout.text_search_config:
            raise ConfigurationError(
                f"the passages' full-text index uses the text search configuration {meta['text_search_config']!r}, "
                f"not {layout.text_search_config!r}",
                hint=f"set ANAPHORA_POSTGRES_TEXT_SEARCH_CONFIG={meta['text_search_config']}, or {_RESET_HINT}",
            )

    @staticmethod
    def _create_vector_extension(conn: Any) -> None:
        import psycopg
        from psycopg import sql

        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (_EXTENSION,)).fetchone():
            return
        try:
            with conn.transaction():  # a savepoint, so the error below is ours rather than an aborted transaction
                conn.execute(sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(_EXTENSION)))
        except psycopg.Error as exc:
            raise vector_extension_error(exc) from exc

    # -- DocumentRegistry --------------------------------------------------------------------------------------
    def documents(self) -> list[StoredDocument]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT root, source, content_hash, chunk_count, ingested_at FROM documents ORDER BY source, root"
            ).fetchall()
        return [StoredDocument(root, source, digest, count, at.timestamp()) for root, source, digest, count, at in rows]

    def replace_document(
        self,
        root: str,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        embedder: str,
    ) -> None:
        """Insert or replace one document and all its passages in one transaction."""
        self.replace_documents([DocumentVersion(root, source, content_hash, chunks, vectors)], embedder)

    def replace_documents(self, documents: Sequence[DocumentVersion], embedder: str) -> None:
        """Insert or replace documents and all their passages in one transaction. Concurrent replacements of the
        same document (two replicas ingesting it) take turns on its row; a passage id another document took
        meanwhile raises :class:`PassageIdTakenError` (the unique index decides, after the other commits)."""
        import psycopg

        if not documents:
            return
        for document in documents:
            if len(document.vectors):
                check_dimension(np.asarray(document.vectors, dtype=np.float32), self.dim)
        try:
            with self._connection() as conn, conn.transaction():
                for document in documents:
                    self._write_document(conn, document)
                conn.execute(
                    "INSERT INTO corpus_meta (key, value) VALUES ('embedder', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (embedder,),
                )
        except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected) as exc:
            # two ingestions writing the same ids in opposite orders deadlock; PostgreSQL aborts one of them
            if isinstance(exc, psycopg.errors.UniqueViolation) and exc.diag.constraint_name != "passages_id_key":
                raise
            raise PassageIdTakenError(
                f"a passage id is already used by another document: {exc.diag.message_detail or exc}",
                hint="ingest again: the ids are chosen anew",
            ) from exc

    @staticmethod
    def _write_document(conn: Any, document: DocumentVersion) -> None:
        root, source, content_hash, chunks, vectors = document
        document_id = conn.execute(
            "INSERT INTO documents (root, source, content_hash, chunk_count, ingested_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (root, source) DO UPDATE SET "
            "content_hash = EXCLUDED.content_hash, chunk_count = EXCLUDED.chunk_count, "
            "ingested_at = EXCLUDED.ingested_at RETURNING id",
            (_text(root), _text(source), content_hash, len(chunks), datetime.fromtimestamp(time.time(), UTC)),
        ).fetchone()[0]
        conn.execute("DELETE FROM passages WHERE document_id = %s", (document_id,))
        with (
            conn.cursor() as cursor,
            cursor.copy("COPY passages (id, document_id, ordinal, heading, text, embedding) FROM STDIN") as copy,
        ):
            for chunk, vector in zip(chunks, vectors, strict=True):
                copy.write_row(
                    (
                        _text(chunk.id),
                        document_id,
                        chunk.ordinal,
                        _text(chunk.heading),
                        _text(chunk.text),
                        vector_literal(vector),
                    )
                )

    def remove_documents(self, documents: Iterable[tuple[str, str]]) -> int:
        pairs = [(_text(root), _text(source)) for root, source in documents]
        if not pairs:
            return 0
        with self._connection() as conn:
            return conn.execute(
                "DELETE FROM documents d USING unnest(%s::text[], %s::text[]) AS x (root, source) "
                "WHERE d.root = x.root AND d.source = x.source",
                ([root for root, _ in pairs], [source for _, source in pairs]),
            ).rowcount

    def remove_source(self, source: str) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute("DELETE FROM documents WHERE source = %s RETURNING root", (_text(source),)).fetchall()
        return sorted(root for (root,) in rows)

    def taken_chunk_ids(self, ids: Sequence[str], root: str, source: str) -> set[str]:
        if not ids:
            return set()
        wanted = {_text(i): i for i in ids}
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT p.id FROM passages p JOIN documents d ON d.id = p.document_id "
                "WHERE p.id = ANY(%s) AND NOT (d.root = %s AND d.source = %s)",
                (list(wanted), _text(root), _text(source)),
            ).fetchall()
        return {wanted[i] for (i,) in rows}

    # -- StoredVectors (re-embedding for another embedder) -----------------------------------------------------
    def embedder(self) -> str | None:
        """The embedder that embedded the stored passages (None: no passage stored)."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT value FROM corpus_meta WHERE key = 'embedder' AND EXISTS (SELECT 1 FROM passages)"
            ).fetchone()
        return row[0] if row else None

    def keys_and_texts(self) -> tuple[np.ndarray, list[str]]:
        """Every passage's key and what was embedded of it (heading and text, as the ingestor gives them)."""
        with self._connection() as conn:
            rows = conn.execute("SELECT key, heading, text FROM passages ORDER BY key").fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64), [search_text(r[1], r[2]) for r in rows]

    def replace_vectors(self, keys: Sequence[int], vectors: np.ndarray, embedder: str) -> None:
        """Every passage's vector, embedded by ``embedder``, in one transaction (replicas searching meanwhile see
        all the old vectors or all the new ones); refused if the passages changed since ``keys`` were read."""
        vectors = np.asarray(vectors, dtype=np.float32)
        check_dimension(vectors, self.dim)
        with self._connection() as conn, conn.transaction():
            conn.execute("LOCK TABLE passages IN SHARE ROW EXCLUSIVE MODE")
            stored = [r[0] for r in conn.execute("SELECT key FROM passages ORDER BY key").fetchall()]
            if sorted(int(k) for k in keys) != stored:
                raise StoreError(
                    "the passages changed while they were re-embedded", hint="ingest again: it re-embeds them"
                )
            with conn.cursor() as cursor:
                cursor.executemany(
                    "UPDATE passages SET embedding = %s::vector WHERE key = %s",
                    [(vector_literal(v), int(k)) for k, v in zip(keys, vectors, strict=True)],
                )
            conn.execute(
                "INSERT INTO corpus_meta (key, value) VALUES ('embedder', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (embedder,),
            )

    # -- PassageIndex ------------------------------------------------------------------------------------------
    def dense(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        vectors = np.asarray(vectors, dtype=np.float32)
        check_dimension(vectors, self.dim)
        if not len(vectors):
            return []
        with self._connection() as conn:
            built_with = conn.execute(
                "SELECT value FROM corpus_meta WHERE key = 'embedder' AND EXISTS (SELECT 1 FROM passages)"
            ).fetchone()
            if built_with and built_with[0] != self.embedder_name:
                raise embedder_mismatch(built_with[0], self.embedder_name)
            rows = conn.execute(_DENSE, {"vectors": [vector_literal(v) for v in vectors], "k": k}).fetchall()
        return _rankings(rows, len(vectors))

    def lexical(self, queries: Sequence[str], k: int) -> list[Ranking]:
        texts = [any_word_query(_text(q)) for q in queries]
        if not any(texts):
            return [[] for _ in texts]
        with self._connection() as conn:
            rows = conn.execute(_LEXICAL, {"queries": texts, "config": self.text_search_config, "k": k}).fetchall()
        return _rankings(rows, len(texts))

    def similarity(self, vectors: np.ndarray, keys: Sequence[Sequence[int]]) -> list[dict[int, float]]:
        vectors = np.asarray(vectors, dtype=np.float32)
        check_dimension(vectors, self.dim)
        pairs = [(n, int(key)) for n, wanted in enumerate(keys, start=1) for key in wanted]
        found: list[dict[int, float]] = [{} for _ in keys]
        if not pairs:
            return found
        with self._connection() as conn:
            rows = conn.execute(
                _SIMILARITY,
                {
                    "ns": [n for n, _ in pairs],
                    "keys": [key for _, key in pairs],
                    "vectors": [vector_literal(v) for v in vectors],
                },
            ).fetchall()
        for n, key, score in rows:
            found[n - 1][int(key)] = float(score)
        return found

    def passages(self, keys: Sequence[int]) -> dict[int, Chunk]:
        if not keys:
            return {}
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT p.key, p.id, p.ordinal, p.heading, p.text, d.source FROM passages p "
                "JOIN documents d ON d.id = p.document_id WHERE p.key = ANY(%s)",
                ([int(k) for k in keys],),
            ).fetchall()
        return {
            key: Chunk(id=pid, text=text, source=source, heading=heading, ordinal=ordinal)
            for key, pid, ordinal, heading, text, source in rows
        }

    def neighbours(self, ids: Sequence[str], span: int) -> dict[str, list[Chunk]]:
        wanted = {_text(i): i for i in ids}
        if not wanted or span < 1:
            return {}
        with self._connection() as conn:
            rows = conn.execute(_NEIGHBOURS, {"ids": list(wanted), "span": span}).fetchall()
        found: dict[str, list[Chunk]] = {}
        for anchor, pid, ordinal, heading, text, source in rows:
            chunk = Chunk(id=pid, text=text, source=source, heading=heading, ordinal=ordinal)
            found.setdefault(wanted[anchor], []).append(chunk)
        return found
