"""The SQLite database: opened in WAL mode, migrated on open, shared by the SQLite-backed stores."""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from anaphora.errors import StoreError
from anaphora.store.migrations import Migrations, migrate_now
from anaphora.store.turn_fields import fields_from_trace

Migration = Callable[[sqlite3.Connection], None]
T = TypeVar("T")
HINT = "upgrade Anaphora, or point ANAPHORA_DATA_DIR at another directory"
# Steps recorded in this ledger that another owner of tables in the same database now runs (and records in its own):
# long-term memory's (anaphora.memory.sqlite_schema).
MOVED_TO_MEMORY = ("m004_memory", "m005_memory_epochs", "m007_episodes_keep_the_users_words")
MIGRATIONS: Migrations[Migration] = Migrations("the SQLite store", hint=HINT, moved=MOVED_TO_MEMORY)
migration = MIGRATIONS  # the decorator that registers a step
# The order every step ran in while a store counted them in PRAGMA user_version instead of recording their names.
NUMBERED = (
    "m001_initial",
    "m002_summaries",
    "m003_conversation_activity",
    "m004_memory",
    "m005_memory_epochs",
    "m006_turn_window_fields",
    "m007_episodes_keep_the_users_words",
)


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute ``;``-separated DDL inside the caller's transaction (``executescript`` would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            root TEXT NOT NULL,
            source TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            chunk_count INTEGER NOT NULL,
            ingested_at REAL NOT NULL,
            UNIQUE (root, source)
        );
        CREATE TABLE chunks (
            key INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            heading TEXT NOT NULL,
            text TEXT NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX chunks_document ON chunks(document_id);
        CREATE TABLE embedding_cache (
            key TEXT PRIMARY KEY,
            vector BLOB NOT NULL,
            used_at REAL NOT NULL
        );
        CREATE INDEX embedding_cache_used ON embedding_cache(used_at);
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX conversations_user ON conversations(user_id, updated_at);
        CREATE TABLE turns (
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            question TEXT NOT NULL,
            answer TEXT NOT NULL,
            citations TEXT NOT NULL,
            trace TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, idx)
        );
        """,
    )


@migration
def m002_summaries(db: sqlite3.Connection) -> None:
    """Every version of a conversation's rolling summary is kept (audit); the latest is used."""
    run_script(
        db,
        """
        CREATE TABLE summaries (
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            covers_turns INTEGER NOT NULL,
            text TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, covers_turns)
        )
        """,
    )


@migration
def m003_conversation_activity(db: sqlite3.Connection) -> None:
    """The history TTL sweeper finds inactive conversations by their last activity."""
    run_script(db, "CREATE INDEX conversations_updated ON conversations(updated_at)")


@migration
def m006_turn_window_fields(db: sqlite3.Connection) -> None:
    """What the next turn reads of a stored turn gets its own columns (the trace is audit only); existing turns
    get them from their trace, once (:mod:`anaphora.store.turn_fields`). ``window_start`` NULL: unknown."""
    run_script(
        db,
        """
        ALTER TABLE turns ADD COLUMN shown_passages TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE turns ADD COLUMN window_start INTEGER
        """,
    )
    updates = []
    for row in db.execute("SELECT rowid, idx, trace FROM turns WHERE trace != 'null'"):
        shown, start = fields_from_trace(json.loads(row[2]), row[1])
        if shown or start is not None:
            updates.append((json.dumps(shown), start, row[0]))
    db.executemany("UPDATE turns SET shown_passages = ?, window_start = ? WHERE rowid = ?", updates)


class SQLiteLedger:
    """The steps one owner of tables in the SQLite database has run, by name in ``table``. ``earlier(db)``: the
    names to record first when the table is new and empty, steps that ran before this ledger existed."""

    def __init__(
        self,
        db: sqlite3.Connection,
        table: str = "schema_migrations",
        earlier: Callable[[sqlite3.Connection], list[str]] | None = None,
    ) -> None:
        self.db = db
        self.table = table
        self.earlier = earlier or counted_in_user_version

    async def applied(self) -> list[str]:
        db = self.db
        db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        applied = [row[0] for row in db.execute(f"SELECT name FROM {self.table}")]
        if not applied:
            applied = self.earlier(db)
            db.executemany(f"INSERT INTO {self.table} VALUES (?, 0)", [(n,) for n in applied])
        return applied

    async def apply(self, name: str, step: Migration, number: int) -> None:
        step(self.db)
        self.db.execute(f"INSERT INTO {self.table} VALUES (?, strftime('%s', 'now'))", (name,))


def counted_in_user_version(db: sqlite3.Connection) -> list[str]:
    """The steps of a store from before steps were recorded by name, which counted them in ``PRAGMA user_version``."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    return list(NUMBERED[:version]) + [f"step {n}" for n in range(len(NUMBERED) + 1, version + 1)]


@migration
def m008_feedback(db: sqlite3.Connection) -> None:
    """Votes on answers (issue 49): one per turn per user, kept with the turn (it goes when the turn goes); the
    operator's report reads turns by time across users."""
    run_script(
        db,
        """
        CREATE TABLE feedback (
            conversation_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            vote TEXT NOT NULL CHECK (vote IN ('up', 'down')),
            comment TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, idx, user_id),
            FOREIGN KEY (conversation_id, idx) REFERENCES turns(conversation_id, idx) ON DELETE CASCADE
        );
        CREATE INDEX turns_created ON turns(created_at)
        """,
    )


def inline_unless_busy(method: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """An async method of a store over a :class:`Database` (``self.db``) from a blocking one. It runs on the caller's
    thread (the event loop's: a few indexed statements cost less than a thread hop), holding the database, while the
    database is free, and in a worker thread while another thread holds it (a long write, e.g. a branch's copy), so a
    caller never waits for the database on the event loop. Only for methods that take no other lock (the database's
    would then be taken first, against the usual order): see :func:`inline_if_free`."""

    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> T:
        with self.db.held_if_free() as free:
            if free:
                return method(self, *args, **kwargs)
        return await asyncio.to_thread(method, self, *args, **kwargs)

    return run


def inline_if_free(method: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """As :func:`inline_unless_busy`, for methods that take locks of their own: the database is only looked at, not
    held, so a write that starts between the look and the method's first statement can still make it wait."""

    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> T:
        with self.db.held_if_free() as free:
            pass
        if free:
            return method(self, *args, **kwargs)
        return await asyncio.to_thread(method, self, *args, **kwargs)

    return run


@migration
def m008_sources(db: sqlite3.Connection) -> None:
    """Ingested folders and sites with how they are published and their last sync, and each page's URL, heading
    ids, sync validators and outcome (:mod:`anaphora.store.sources`)."""
    run_script(
        db,
        """
        CREATE TABLE sources (
            id INTEGER PRIMARY KEY,
            root TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            base_url TEXT,
            generator TEXT,
            options TEXT NOT NULL DEFAULT '{}',
            synced_at REAL,
            report TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE source_pages (
            root TEXT NOT NULL,
            url TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            title TEXT NOT NULL DEFAULT '',
            anchors TEXT NOT NULL DEFAULT '[]',
            outcome TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            etag TEXT,
            last_modified TEXT,
            lastmod TEXT,
            checked_at REAL NOT NULL,
            PRIMARY KEY (root, url)
        );
        CREATE INDEX source_pages_source ON source_pages(source)
        """,
    )


class Database:
    """One SQLite connection guarded by a lock; statements are short, so callers run them inline."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open the SQLite store at {self.path}: {exc}",
                hint="check the data directory (ANAPHORA_DATA_DIR) exists and is writable",
            ) from exc
        self._lock = threading.RLock()
        try:
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _migrate(self) -> None:
        with self.transaction() as db:
            applied = migrate_now(MIGRATIONS, SQLiteLedger(db), where=f" at {self.path}")
            # what an Anaphora from before steps had names reads to refuse a newer store: the steps of its numbering
            # (later steps, recorded by name only, add tables it never reads)
            done = set(applied) | MIGRATIONS.moved
            db.execute(f"PRAGMA user_version = {sum(1 for name in NUMBERED if name in done)}")
            if db.execute("SELECT 1 FROM meta WHERE key = 'store_id'").fetchone() is None:
                self.set_meta(db, "store_id", uuid.uuid4().hex)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All-or-nothing: a crash or exception inside leaves the database as it was."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    @contextmanager
    def held_if_free(self) -> Iterator[bool]:
        """Hold the connection's lock if no other thread does (yields True), else yield False at once."""
        free = self._lock.acquire(blocking=False)
        try:
            yield free
        finally:
            if free:
                self._lock.release()

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0]["value"] if rows else None

    @staticmethod
    def set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
            (key, value, value),
        )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
