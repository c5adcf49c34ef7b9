"""Long-term memory's tables in the SQLite database (``memory_*``), created and migrated by the memory store
itself when it is built, with the runner every store uses (:mod:`anaphora.store.migrations`); its steps are
recorded in ``memory_migrations``, as the PostgreSQL memory store records its own (:mod:`anaphora.memory.
postgres_store`). Until this module owned them, the database's own ledger (``schema_migrations``) recorded them
under the same names: a database from then adopts those records the first time the memory store opens it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from anaphora.memory.legacy_episodes import users_words
from anaphora.store.migrations import Migrations, migrate_now
from anaphora.store.sqlite_database import HINT, Database, SQLiteLedger, run_script

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: Migrations[Migration] = Migrations("the SQLite memory tables", hint=HINT)
migration = MIGRATIONS  # the decorator that registers a step
LEDGER = "memory_migrations"


def migrate(database: Database) -> None:
    """Bring the memory tables of ``database`` up to date (one transaction)."""
    with database.transaction() as db:
        migrate_now(MIGRATIONS, SQLiteLedger(db, LEDGER, earlier=recorded_by_the_store), where=f" at {database.path}")


def recorded_by_the_store(db: sqlite3.Connection) -> list[str]:
    """The memory steps the database's own ledger recorded while it ran them."""
    names = set(MIGRATIONS.names)
    return [row[0] for row in db.execute("SELECT name FROM schema_migrations") if row[0] in names]


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
