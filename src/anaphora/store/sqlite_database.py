"""The SQLite database: opened in WAL mode, migrated on open, shared by the SQLite-backed stores."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from anaphora.errors import StoreError
from anaphora.store.legacy_episodes import users_words
from anaphora.store.migrations import Migrations
from anaphora.store.turn_fields import fields_from_trace

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: Migrations[Migration] = Migrations(
    "the SQLite store", hint="upgrade Anaphora, or point ANAPHORA_DATA_DIR at another directory"
)
migration = MIGRATIONS  # the decorator that registers a step


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
def m004_memory(db: sqlite3.Connection) -> None:
    """Long-term memory per user (``anaphora.memory``): items with provenance, their vectors, entities, profiles,
    and a count of each user's writes (what in-process search indexes compare to know they are current). Every table
    carries ``user_id``, so each read filters by it and erase deletes by it."""
    run_script(
        db,
        """
        CREATE TABLE memory_items (
            key INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            turns TEXT NOT NULL,
            time REAL NOT NULL,
            subject TEXT NOT NULL,
            attribute TEXT NOT NULL,
            value TEXT NOT NULL,
            valid_from REAL,
            valid_to REAL,
            source TEXT NOT NULL
        );
        CREATE INDEX memory_items_user ON memory_items(user_id, time);
        CREATE INDEX memory_items_time ON memory_items(time);
        CREATE INDEX memory_items_fact ON memory_items(user_id, subject, attribute) WHERE kind = 'fact';
        CREATE TABLE memory_vectors (
            item_key INTEGER PRIMARY KEY REFERENCES memory_items(key) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX memory_vectors_user ON memory_vectors(user_id);
        CREATE TABLE memory_entities (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            mentions INTEGER NOT NULL,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        CREATE INDEX memory_entities_seen ON memory_entities(last_seen);
        CREATE TABLE memory_profiles (
            user_id TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            covers TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE memory_users (
            user_id TEXT PRIMARY KEY,
            writes INTEGER NOT NULL
        )
        """,
    )


@migration
def m005_memory_epochs(db: sqlite3.Connection) -> None:
    """Each user's erase epoch, keyed by a hash of the user id: a background memory write checks it inside its
    transaction, so an erase that came first wins (``anaphora.memory.protocols``)."""
    run_script(db, "CREATE TABLE memory_epochs (user_key TEXT PRIMARY KEY, epoch INTEGER NOT NULL)")


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


@migration
def m007_episodes_keep_the_users_words(db: sqlite3.Connection) -> None:
    """Episodes written before issue 24 held the turn's question and the assistant's answer ("question\nanswer");
    memory quotes the user's words only, so each keeps as many lines as the stored turn's question has (one when
    the turn is gone). The answer's words leave the text and the lexical index (a document deleted later is not
    quoted from an episode); the episode's vector is left as it was, a recall aid that is never shown. Search
    indexes rebuild, as after a removal."""
    rows = db.execute(
        "SELECT e.key, e.text, t.question FROM memory_items e LEFT JOIN turns t ON t.conversation_id = "
        "e.conversation_id AND t.idx = json_extract(e.turns, '$[0]') "
        "WHERE e.kind = 'episode' AND instr(e.text, char(10)) > 0"
    ).fetchall()
    changed = 0
    for key, text, question in rows:
        kept = users_words(text, question)
        if kept != text:
            db.execute("UPDATE memory_items SET text = ? WHERE key = ?", (kept, key))
            changed += 1
    if changed:
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('memory_removals', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )


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
            db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            applied = [row[0] for row in db.execute("SELECT name FROM schema_migrations")]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if not applied and version:  # a store from before steps were recorded by name: user_version counted them
                applied = MIGRATIONS.names[:version] + [f"step {n}" for n in range(len(MIGRATIONS) + 1, version + 1)]
                db.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [(n,) for n in applied])
            for name, step in MIGRATIONS.pending(applied, where=f" at {self.path}"):
                step(db)
                db.execute("INSERT INTO schema_migrations VALUES (?, strftime('%s', 'now'))", (name,))
                applied.append(name)
            db.execute(f"PRAGMA user_version = {len(applied)}")  # what an older Anaphora reads to refuse it
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
