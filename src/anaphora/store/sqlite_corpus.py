"""SQLite-backed document registry and chunk table: the source of truth the search indexes derive from."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence

import numpy as np

from anaphora.errors import PassageIdTakenError, StoreError
from anaphora.store.protocols import DocumentVersion, StoredDocument
from anaphora.store.sqlite_database import Database
from anaphora.types import Chunk

__all__ = ["SQLiteCorpus", "StoredDocument", "search_text"]


def _blob(vector) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def search_text(heading: str, text: str) -> str:
    """What BM25 and the embedder see for a chunk: its heading path, then its text."""
    return f"{heading}\n{text}" if heading else text


class SQLiteCorpus:
    """Documents and their chunks (with vectors): the :class:`~anaphora.store.protocols.DocumentRegistry` of the
    embedded backend, read by :class:`~anaphora.retrieval.embedded.EmbeddedPassageIndex`.

    Every change bumps ``generation`` in the same transaction, so a derived index (BM25, HNSW) can tell whether it
    is stale by comparing the generation it was built at. ``local_writes`` counts the changes made through this
    object, so a reader in the same process can notice them without a query.

    A chunk's ``key`` is never given to another chunk, even after its document was removed (a high-water mark in
    ``meta``): a search index of an older generation, still serving while the next one builds, then returns keys
    that name the passage it indexed or nothing, never another passage.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self.local_writes = 0

    # -- reads -------------------------------------------------------------------------------------------------
    def generation(self) -> int:
        return int(self.db.get_meta("corpus_generation") or 0)

    def embedder(self) -> str | None:
        return self.db.get_meta("corpus_embedder")

    def documents(self) -> list[StoredDocument]:
        rows = self.db.query(
            "SELECT root, source, content_hash, chunk_count, ingested_at FROM documents ORDER BY source"
        )
        return [StoredDocument(**dict(r)) for r in rows]

    def chunk_count(self) -> int:
        return self.db.query("SELECT COUNT(*) AS n FROM chunks")[0]["n"]

    def chunk_keys(self) -> list[int]:
        return [r["key"] for r in self.db.query("SELECT key FROM chunks ORDER BY key")]

    def answer_units_mark(self) -> str | None:
        """What :class:`~anaphora.ingest.units.AnswerUnits` recorded when it last found every unit embedded."""
        return self.db.get_meta("answer_units_mark")

    def set_answer_units_mark(self, mark: str) -> None:
        with self.db.transaction() as db:
            Database.set_meta(db, "answer_units_mark", mark)

    def keys_and_texts(self) -> tuple[np.ndarray, list[str]]:
        rows = self.db.query("SELECT key, heading, text FROM chunks ORDER BY key")
        keys = np.fromiter((r["key"] for r in rows), dtype=np.int64, count=len(rows))
        return keys, [search_text(r["heading"], r["text"]) for r in rows]

    def keys_and_vectors(self) -> tuple[np.ndarray, np.ndarray | None]:
        rows = self.db.query("SELECT key, vector FROM chunks ORDER BY key")
        if not rows:
            return np.empty(0, dtype=np.int64), None
        keys = np.fromiter((r["key"] for r in rows), dtype=np.int64, count=len(rows))
        return keys, np.stack([np.frombuffer(r["vector"], dtype=np.float32) for r in rows])

    def chunks(self, keys: Sequence[int]) -> dict[int, Chunk]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = self.db.query(
            f"SELECT c.key, c.id, c.ordinal, c.heading, c.text, d.source FROM chunks c "
            f"JOIN documents d ON d.id = c.document_id WHERE c.key IN ({marks})",
            [int(k) for k in keys],
        )
        return {
            r["key"]: Chunk(id=r["id"], text=r["text"], source=r["source"], heading=r["heading"], ordinal=r["ordinal"])
            for r in rows
        }

    def neighbours(self, ids: Sequence[str], span: int) -> dict[str, list[Chunk]]:
        """Each stored passage of ``ids`` with the other chunks of its document within ``span`` ordinals of it, in
        ordinal order (:meth:`~anaphora.store.protocols.PassageIndex.neighbours`)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted or span < 1:
            return {}
        found: dict[str, list[Chunk]] = {}
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            marks = ",".join("?" * len(batch))
            rows = self.db.query(
                f"SELECT a.id AS anchor, c.id, c.ordinal, c.heading, c.text, d.source FROM chunks a "
                f"JOIN chunks c ON c.document_id = a.document_id AND c.key != a.key "
                f"AND c.ordinal BETWEEN a.ordinal - ? AND a.ordinal + ? "
                f"JOIN documents d ON d.id = a.document_id WHERE a.id IN ({marks}) ORDER BY a.id, c.ordinal, c.key",
                [span, span, *batch],
            )
            for r in rows:
                chunk = Chunk(
                    id=r["id"], text=r["text"], source=r["source"], heading=r["heading"], ordinal=r["ordinal"]
                )
                found.setdefault(r["anchor"], []).append(chunk)
        return found

    # -- writes ------------------------------------------------------------------------------------------------
    def replace_document(
        self,
        root: str,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        embedder: str,
    ) -> None:
        """Insert or replace one document and all its chunks, atomically."""
        self.replace_documents([DocumentVersion(root, source, content_hash, chunks, vectors)], embedder)

    def replace_documents(self, documents: Sequence[DocumentVersion], embedder: str) -> None:
        """Insert or replace documents and all their chunks in one transaction."""
        if not documents:
            return
        try:
            with self.db.transaction() as db:
                next_key = self._next_key(db)
                for root, source, content_hash, chunks, vectors in documents:
                    db.execute("DELETE FROM documents WHERE root = ? AND source = ?", (root, source))
                    document_id = db.execute(
                        "INSERT INTO documents(root, source, content_hash, chunk_count, ingested_at) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (root, source, content_hash, len(chunks), time.time()),
                    ).lastrowid
                    db.executemany(
                        "INSERT INTO chunks(key, id, document_id, ordinal, heading, text, vector) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [
                            (next_key + n, c.id, document_id, c.ordinal, c.heading, c.text, _blob(v))
                            for n, (c, v) in enumerate(zip(chunks, vectors, strict=True))
                        ],
                    )
                    next_key += len(chunks)
                Database.set_meta(db, "chunk_key_next", str(next_key))
                self._bump(db, embedder)
        except sqlite3.IntegrityError as exc:
            if "chunks.id" not in str(exc):
                raise
            raise PassageIdTakenError(
                f"a passage id is already used by another document: {exc}",
                hint="ingest again: the ids are chosen anew",
            ) from exc

    def replace_vectors(self, keys: Sequence[int], vectors: np.ndarray, embedder: str) -> None:
        """Every passage's vector at once, embedded by ``embedder`` (the index moves to another embedder, e.g. another
        precision): in one transaction, so a reader sees all the old vectors or all the new ones. ``keys`` must be
        every passage's; a passage written meanwhile is refused, not left behind."""
        with self.db.transaction() as db:
            stored = [r[0] for r in db.execute("SELECT key FROM chunks ORDER BY key")]
            if sorted(int(k) for k in keys) != stored:
                raise StoreError(
                    "the passages changed while they were re-embedded", hint="ingest again: it re-embeds them"
                )
            db.executemany(
                "UPDATE chunks SET vector = ? WHERE key = ?",
                [(_blob(v), int(k)) for k, v in zip(keys, vectors, strict=True)],
            )
            self._bump(db, embedder)

    def remove_documents(self, documents: Iterable[tuple[str, str]]) -> int:
        """Remove ``(root, source)`` documents and their chunks."""
        documents = list(documents)
        if not documents:
            return 0
        with self.db.transaction() as db:
            self._keep_key_mark(db)
            removed = 0
            for root, source in documents:
                removed += db.execute("DELETE FROM documents WHERE root = ? AND source = ?", (root, source)).rowcount
            self._bump(db, None)
        return removed

    def remove_source(self, source: str) -> list[str]:
        """Remove every document named ``source`` (in any ingested folder) with its chunks; returns their roots."""
        with self.db.transaction() as db:
            roots = [
                r["root"] for r in db.execute("SELECT root FROM documents WHERE source = ? ORDER BY root", (source,))
            ]
            if roots:
                self._keep_key_mark(db)
                db.execute("DELETE FROM documents WHERE source = ?", (source,))
                self._bump(db, None)
        return roots

    def taken_chunk_ids(self, ids: Sequence[str], root: str, source: str) -> set[str]:
        """Those of ``ids`` already used by chunks of any other document."""
        taken: set[str] = set()
        for start in range(0, len(ids), 500):
            batch = list(ids[start : start + 500])
            marks = ",".join("?" * len(batch))
            rows = self.db.query(
                f"SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
                f"WHERE c.id IN ({marks}) AND NOT (d.root = ? AND d.source = ?)",
                [*batch, root, source],
            )
            taken.update(r["id"] for r in rows)
        return taken

    @staticmethod
    def _next_key(db) -> int:
        """The first key no chunk ever had: past the high-water mark and past every key present (a database
        written before the mark existed has none)."""
        mark = db.execute("SELECT value FROM meta WHERE key = 'chunk_key_next'").fetchone()
        highest = db.execute("SELECT COALESCE(MAX(key), 0) FROM chunks").fetchone()[0]
        return max(int(mark[0]) if mark else 1, int(highest) + 1)

    def _keep_key_mark(self, db) -> None:
        """Before deleting chunks: record the high-water mark, so their keys stay retired."""
        Database.set_meta(db, "chunk_key_next", str(self._next_key(db)))

    def _bump(self, db, embedder: str | None) -> None:
        self.local_writes += 1
        current = db.execute("SELECT value FROM meta WHERE key = 'corpus_generation'").fetchone()
        Database.set_meta(db, "corpus_generation", str(int(current[0]) + 1 if current else 1))
        if embedder:
            Database.set_meta(db, "corpus_embedder", embedder)
