"""The default memory store: tables in the SQLite database (``memory_*``, created and migrated by this store when it
is built: :mod:`anaphora.memory.sqlite_schema`), vectors as float32 blobs beside the items, searched by a per-user
in-process index (:mod:`anaphora.memory.index`).

The index is a derived cache of the tables, stamped with the user's count of writes (``memory_users``) and the
database's count of removals (``meta``): before each search both are read (two key look-ups); after a write the
new rows are appended, after any removal (here or by another process on the same file) the index is rebuilt from
the tables. So a search never sees another user's item, an erased one, nor misses one of the user's.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from anaphora.errors import MemoryNotFoundError
from anaphora.lru import Lru
from anaphora.memory.index import UserMemoryIndex
from anaphora.memory.sqlite_schema import migrate
from anaphora.memory.types import (
    Entity,
    EntityMention,
    MemoryExport,
    MemoryHit,
    MemoryItem,
    MemoryKind,
    MemoryPage,
    Profile,
    epoch_key,
)
from anaphora.store.sqlite_database import Database, inline_if_free

REMOVALS = "memory_removals"  # the meta key counting removals of memory rows, by any user
_EPOCH = "SELECT epoch FROM memory_epochs WHERE user_key = ?"
COUNTED = (("memories", "memory_items"), ("vectors", "memory_vectors"), ("entities", "memory_entities"))


def _item(row: sqlite3.Row) -> MemoryItem:
    return MemoryItem(
        id=row["id"],
        user_id=row["user_id"],
        kind=row["kind"],
        text=row["text"],
        conversation_id=row["conversation_id"],
        turns=tuple(json.loads(row["turns"])),
        time=row["time"],
        subject=row["subject"],
        attribute=row["attribute"],
        value=row["value"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        source=row["source"],
    )


def _entity(row: sqlite3.Row) -> Entity:
    return Entity(**{k: row[k] for k in row.keys()})  # noqa: SIM118 - sqlite3.Row has keys(), not iteration


class SQLiteMemoryStore:
    """:class:`~anaphora.memory.MemoryStore` in the SQLite database. ``cached_users`` bounds how many users'
    search indexes are kept in memory (least recently searched dropped first)."""

    def __init__(self, db: Database, *, cached_users: int = 64) -> None:
        migrate(db)
        self.db = db
        self._indexes: Lru[str, UserMemoryIndex] = Lru(cached_users)
        self._indexes_lock = threading.RLock()  # held while an index is brought up to date

    async def open(self) -> None:
        return None  # the database was opened, and the memory tables migrated, when this store was built

    @inline_if_free
    def ping(self) -> None:
        self.db.query("SELECT 1 FROM memory_items LIMIT 1")

    async def aclose(self) -> None:
        with self._indexes_lock:
            self._indexes.clear()  # the database is closed by its owner

    # --- writes ----------------------------------------------------------------------------------------------

    @inline_if_free
    def epoch(self, user_id: str) -> int:
        rows = self.db.query(_EPOCH, (epoch_key(user_id),))
        return rows[0]["epoch"] if rows else 0

    @inline_if_free
    def add(
        self, user_id: str, items: Sequence[MemoryItem], vectors: np.ndarray | None = None, *, epoch: int | None = None
    ) -> list[MemoryItem]:
        if any(item.user_id != user_id for item in items):
            raise ValueError(f"every item written for {user_id!r} must belong to it")
        if vectors is not None and len(vectors) != len(items):
            raise ValueError(f"{len(vectors)} vectors for {len(items)} items")
        stored: list[MemoryItem] = []
        with self.db.transaction() as db:
            if _stale(db, user_id, epoch):
                return []
            for position, item in enumerate(items):
                if item.kind == "fact":
                    item = self._supersede(db, item)
                    if item is None:
                        continue
                key = db.execute(
                    "INSERT INTO memory_items(id, user_id, kind, text, conversation_id, turns, time, subject, "
                    "attribute, value, valid_from, valid_to, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        item.id,
                        user_id,
                        item.kind,
                        item.text,
                        item.conversation_id,
                        json.dumps(list(item.turns)),
                        item.time,
                        item.subject,
                        item.attribute,
                        item.value,
                        item.valid_from,
                        item.valid_to,
                        item.source,
                    ),
                ).lastrowid
                if vectors is not None:
                    vector = np.ascontiguousarray(vectors[position], dtype=np.float32)
                    db.execute("INSERT INTO memory_vectors VALUES (?, ?, ?)", (key, user_id, vector.tobytes()))
                stored.append(item)
            db.execute(
                "INSERT INTO memory_users(user_id, writes) VALUES (?, 1) "
                "ON CONFLICT(user_id) DO UPDATE SET writes = writes + 1",
                (user_id,),
            )
        return stored

    @staticmethod
    def _supersede(db: sqlite3.Connection, fact: MemoryItem) -> MemoryItem | None:
        """Close the user's current facts of the same subject and attribute that this one replaces; ``None`` when
        it repeats a current fact. A fact older than the current one arrives already closed by it."""
        since = fact.valid_from if fact.valid_from is not None else fact.time
        current = db.execute(
            "SELECT id, value, COALESCE(valid_from, time) AS since FROM memory_items WHERE user_id = ? AND "
            "kind = 'fact' AND subject = ? COLLATE NOCASE AND attribute = ? COLLATE NOCASE AND valid_to IS NULL",
            (fact.user_id, fact.subject, fact.attribute),
        ).fetchall()
        if any(row["value"].casefold() == fact.value.casefold() for row in current):
            return None
        closes = [row["id"] for row in current if row["since"] <= since]
        later = [row["since"] for row in current if row["since"] > since]
        db.executemany(
            "UPDATE memory_items SET valid_to = ? WHERE id = ? AND user_id = ?",
            [(since, item_id, fact.user_id) for item_id in closes],
        )
        if later and fact.valid_to is None:
            return replace(fact, valid_from=since, valid_to=min(later))
        return fact

    @inline_if_free
    def upsert_entities(self, user_id: str, mentions: Sequence[EntityMention], *, epoch: int | None = None) -> None:
        with self.db.transaction() as db:
            if _stale(db, user_id, epoch):
                return
            db.executemany(
                "INSERT INTO memory_entities(user_id, key, name, kind, mentions, first_seen, last_seen) "
                "VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT(user_id, key) DO UPDATE SET mentions = mentions + 1, "
                "first_seen = MIN(first_seen, excluded.first_seen), last_seen = MAX(last_seen, excluded.last_seen)",
                [(user_id, m.name.casefold(), m.name, m.kind, m.seen_at, m.seen_at) for m in mentions],
            )

    @inline_if_free
    def set_profile(self, user_id: str, text: str, covers: Sequence[str] = (), *, epoch: int | None = None) -> None:
        with self.db.transaction() as db:
            if _stale(db, user_id, epoch):
                return
            db.execute(
                "INSERT INTO memory_profiles(user_id, text, covers, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(user_id) DO UPDATE SET text = excluded.text, covers = excluded.covers, "
                "updated_at = excluded.updated_at",
                (user_id, text, json.dumps(list(covers)), time.time()),
            )

    # --- reads -----------------------------------------------------------------------------------------------

    # The searches run inline, like the store's statements: a few milliseconds of numpy for a user with 6,000
    # items, where a hop to a worker thread cost more than the search on a loaded machine (bench/memory.py). Every
    # method goes to a worker thread only while another thread holds the database (a branch's copy of a long chain:
    # inline_if_free), so none waits for it on the event loop.

    @inline_if_free
    def lexical(self, user_id: str, queries: Sequence[str], k: int) -> list[list[MemoryHit]]:
        index = self._index(user_id)
        return [index.lexical(query, k) for query in queries]

    @inline_if_free
    def dense(self, user_id: str, vectors: np.ndarray, k: int) -> list[list[MemoryHit]]:
        return self._index(user_id).dense(vectors, k)

    @inline_if_free
    def get_many(self, user_id: str, item_ids: Sequence[str]) -> dict[str, MemoryItem]:
        wanted = list(dict.fromkeys(item_ids))
        found: dict[str, MemoryItem] = {}
        for start in range(0, len(wanted), 500):  # within SQLite's bound-parameter limit
            batch = wanted[start : start + 500]
            rows = self.db.query(
                # "+user_id": still filtered by the owner, but looked up by id (not by scanning the user's rows)
                f"SELECT * FROM memory_items WHERE +user_id = ? AND id IN ({','.join('?' * len(batch))})",
                (user_id, *batch),
            )
            found.update((row["id"], _item(row)) for row in rows)
        return {item_id: found[item_id] for item_id in wanted if item_id in found}

    def _profile(self, user_id: str) -> Profile | None:
        rows = self.db.query("SELECT * FROM memory_profiles WHERE user_id = ?", (user_id,))
        if not rows:
            return None
        row = rows[0]
        return Profile(user_id, row["text"], row["updated_at"], tuple(json.loads(row["covers"])))

    profile = inline_if_free(_profile)

    @inline_if_free
    def list(self, user_id: str, *, kind: MemoryKind | None = None, limit: int = 50, offset: int = 0) -> MemoryPage:
        where, params = ("user_id = ? AND kind = ?", (user_id, kind)) if kind else ("user_id = ?", (user_id,))
        rows = self.db.query(
            f"SELECT * FROM memory_items WHERE {where} ORDER BY time DESC, id LIMIT ? OFFSET ?",
            (*params, limit + 1, offset),
        )
        more = len(rows) > limit
        return MemoryPage(tuple(_item(r) for r in rows[:limit]), offset + limit if more else None)

    @inline_if_free
    def entities(self, user_id: str, *, limit: int = 100) -> list[Entity]:
        rows = self.db.query(
            "SELECT * FROM memory_entities WHERE user_id = ? ORDER BY mentions DESC, last_seen DESC, key LIMIT ?",
            (user_id, limit),
        )
        return [_entity(r) for r in rows]

    @inline_if_free
    def export(self, user_id: str) -> MemoryExport:
        rows = self.db.query("SELECT * FROM memory_items WHERE user_id = ? ORDER BY time DESC, id", (user_id,))
        entities = self.db.query(
            "SELECT * FROM memory_entities WHERE user_id = ? ORDER BY mentions DESC, last_seen DESC, key", (user_id,)
        )
        return MemoryExport(
            user_id, tuple(_item(r) for r in rows), tuple(_entity(r) for r in entities), self._profile(user_id)
        )

    # --- removal ---------------------------------------------------------------------------------------------

    @inline_if_free
    def delete(self, user_id: str, item_id: str) -> None:
        with self.db.transaction() as db:
            deleted = db.execute("DELETE FROM memory_items WHERE id = ? AND user_id = ?", (item_id, user_id)).rowcount
            _count_removal(db)
        if not deleted:
            raise MemoryNotFoundError(item_id)
        self._forget_index(user_id)

    @inline_if_free
    def delete_expired(self, before_ts: float) -> dict[str, int]:
        with self.db.transaction() as db:
            vectors = db.execute(
                "SELECT COUNT(*) FROM memory_vectors WHERE item_key IN (SELECT key FROM memory_items WHERE time < ?)",
                (before_ts,),
            ).fetchone()[0]
            memories = db.execute("DELETE FROM memory_items WHERE time < ?", (before_ts,)).rowcount
            entities = db.execute("DELETE FROM memory_entities WHERE last_seen < ?", (before_ts,)).rowcount
            _count_removal(db)
        with self._indexes_lock:
            self._indexes.clear()
        return {"memories": memories, "vectors": vectors, "entities": entities, "profiles": 0}

    @inline_if_free
    def erase_user(self, user_id: str) -> dict[str, int]:
        with self.db.transaction() as db:
            counts = {
                name: db.execute(f"SELECT COUNT(*) FROM {table} WHERE user_id = ?", (user_id,)).fetchone()[0]
                for name, table in COUNTED
            }
            for table in ("memory_vectors", "memory_items", "memory_entities", "memory_users"):
                db.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
            _count_removal(db)
            counts["profiles"] = db.execute("DELETE FROM memory_profiles WHERE user_id = ?", (user_id,)).rowcount
            db.execute(
                "INSERT INTO memory_epochs(user_key, epoch) VALUES (?, 1) "
                "ON CONFLICT(user_key) DO UPDATE SET epoch = epoch + 1",
                (epoch_key(user_id),),
            )
        self._forget_index(user_id)
        return counts

    # --- the per-user search index ---------------------------------------------------------------------------

    def _forget_index(self, user_id: str) -> None:
        with self._indexes_lock:
            self._indexes.pop(user_id)

    def _index(self, user_id: str) -> UserMemoryIndex:
        """The user's index, brought up to date with the tables (appending new rows, rebuilding after removals)."""
        with self._indexes_lock:
            return self._fresh_index(user_id)

    def _fresh_index(self, user_id: str) -> UserMemoryIndex:
        (stamp,) = self.db.query(
            "SELECT (SELECT writes FROM memory_users WHERE user_id = ?) AS writes, "
            "(SELECT value FROM meta WHERE key = ?) AS removals",
            (user_id, REMOVALS),
        )
        writes, removals = stamp["writes"] or 0, stamp["removals"] or "0"
        index = self._indexes.get(user_id)
        if index is not None and index.stamp == (writes, removals):
            return index
        if index is None or index.stamp[1] != removals or index.stamp[0] > writes:
            index = UserMemoryIndex()  # something was removed: rebuild from the tables
        rows = self.db.query(
            "SELECT i.key, i.id, i.text, v.vector FROM memory_items i LEFT JOIN memory_vectors v "
            "ON v.item_key = i.key AND v.user_id = i.user_id WHERE i.user_id = ? AND i.key > ? ORDER BY i.key",
            (user_id, index.max_key),
        )
        for row in rows:
            vector = np.frombuffer(row["vector"], dtype=np.float32) if row["vector"] is not None else None
            index.append(row["key"], row["id"], row["text"], vector)
        index.stamp = (writes, removals)
        self._indexes.put(user_id, index)
        return index


def _stale(db: sqlite3.Connection, user_id: str, epoch: int | None) -> bool:
    """Whether a write begun under ``epoch`` comes after an erase (checked inside the write's transaction, which
    BEGIN IMMEDIATE serialises with the erase's, in any process on the file)."""
    if epoch is None:
        return False
    row = db.execute(_EPOCH, (epoch_key(user_id),)).fetchone()
    return (row[0] if row else 0) != epoch


def _count_removal(db: sqlite3.Connection) -> None:
    """Every search index in every process rebuilds on its next search (removals are rare; adds are appended)."""
    db.execute(
        "INSERT INTO meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
        (REMOVALS,),
    )
