"""Persistent embedding cache in SQLite, keyed by a hash of (embedder, text), bounded with LRU eviction.

Corpus vectors live in the chunk table, so evicting from the cache never loses an indexed passage's vector.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from anaphora.store.sqlite_database import Database

TRIM_EVERY = 256  # writes between size checks: counting rows on every write would cost more than it saves


class SQLiteEmbeddingCache:
    def __init__(self, db: Database, *, max_entries: int = 200_000) -> None:
        self.db = db
        self.max_entries = max_entries
        self._writes_since_trim = 0
        # An upper bound on the rows (counted once, then raised by every write), so that the eviction query, which
        # sorts the table, runs only when the cache may be full: run after every batch of a large ingestion, it
        # made ingesting 100k chunks quadratic.
        self._rows_at_most: int | None = None

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            batch = list(keys[start : start + 500])
            marks = ",".join("?" * len(batch))
            for row in self.db.query(f"SELECT key, vector FROM embedding_cache WHERE key IN ({marks})", batch):
                found[row["key"]] = np.frombuffer(row["vector"], dtype=np.float32)
        if found:
            self._touch(list(found))
        return found

    def _touch(self, keys: list[str]) -> None:
        now = time.time()
        with self.db.transaction() as db:
            db.executemany("UPDATE embedding_cache SET used_at = ? WHERE key = ?", [(now, k) for k in keys])

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        now = time.time()
        with self.db.transaction() as db:
            db.executemany(
                "INSERT INTO embedding_cache(key, vector, used_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET vector = excluded.vector, used_at = excluded.used_at",
                [(k, np.asarray(v, dtype=np.float32).tobytes(), now) for k, v in items.items()],
            )
        if self._rows_at_most is None:
            self._rows_at_most = len(self)
        else:
            self._rows_at_most += len(items)
        self._writes_since_trim += len(items)
        if self._writes_since_trim >= TRIM_EVERY or len(items) > self.max_entries:
            if self._rows_at_most > self.max_entries:
                self.trim()
            else:
                self._writes_since_trim = 0

    def delete_many(self, keys: Sequence[str]) -> int:
        """Forget these entries (right to erase); returns how many existed."""
        removed = 0
        with self.db.transaction() as db:
            for start in range(0, len(keys), 500):
                batch = list(keys[start : start + 500])
                marks = ",".join("?" * len(batch))
                removed += db.execute(f"DELETE FROM embedding_cache WHERE key IN ({marks})", batch).rowcount
        return removed

    def __len__(self) -> int:
        return self.db.query("SELECT COUNT(*) AS n FROM embedding_cache")[0]["n"]

    def trim(self) -> int:
        """Evict the least recently used entries beyond ``max_entries``; returns how many went."""
        self._writes_since_trim = 0
        with self.db.transaction() as db:
            removed = db.execute(
                "DELETE FROM embedding_cache WHERE key IN "
                "(SELECT key FROM embedding_cache ORDER BY used_at DESC, key LIMIT -1 OFFSET ?)",
                (self.max_entries,),
            ).rowcount
        self._rows_at_most = len(self)  # exact again (other processes may write the same file)
        return removed

    def close(self) -> None:
        return None  # lives in the SQLite database, which its owner closes
