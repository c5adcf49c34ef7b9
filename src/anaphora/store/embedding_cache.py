"""Persistent embedding cache in SQLite, keyed by a hash of (embedder, text)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from anaphora.store.database import Database


class SQLiteEmbeddingCache:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            batch = list(keys[start : start + 500])
            marks = ",".join("?" * len(batch))
            for row in self.db.query(f"SELECT key, vector FROM embedding_cache WHERE key IN ({marks})", batch):
                found[row["key"]] = np.frombuffer(row["vector"], dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        now = time.time()
        with self.db.transaction() as db:
            db.executemany(
                "INSERT INTO embedding_cache(key, vector, used_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET used_at = excluded.used_at",
                [(k, np.asarray(v, dtype=np.float32).tobytes(), now) for k, v in items.items()],
            )
