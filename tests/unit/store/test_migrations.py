"""The one migration runner: named steps in order, each recorded in the database's ledger once it has run; the same
coroutine drives the synchronous ledgers (SQLite here) with no event loop, even from inside a running one."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from anaphora.errors import StoreError
from anaphora.store import Database
from anaphora.store.migrations import Migrations, migrate_now
from anaphora.store.sqlite_database import MIGRATIONS, SQLiteLedger

pytestmark = pytest.mark.unit


def two_steps() -> Migrations[Callable[[sqlite3.Connection], None]]:
    steps: Migrations[Callable[[sqlite3.Connection], None]] = Migrations("the test database", hint="start afresh")

    @steps
    def m001_notes(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE notes (text TEXT)")

    @steps
    def m002_note_time(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE notes ADD COLUMN at REAL")

    return steps


def test_steps_run_once_in_order_and_are_recorded_by_name() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    steps = two_steps()
    assert migrate_now(steps, SQLiteLedger(db)) == ["m001_notes", "m002_note_time"]
    assert [row[1] for row in db.execute("PRAGMA table_info(notes)")] == ["text", "at"]
    assert migrate_now(steps, SQLiteLedger(db)) == ["m001_notes", "m002_note_time"]  # nothing runs twice
    assert [row[0] for row in db.execute("SELECT name FROM schema_migrations")] == ["m001_notes", "m002_note_time"]


def test_a_database_with_a_step_this_code_does_not_know_is_refused() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate_now(two_steps(), SQLiteLedger(db))
    db.execute("INSERT INTO schema_migrations VALUES ('m003_from_the_future', 0)")
    with pytest.raises(StoreError, match=r"the test database at here was written by a newer Anaphora") as caught:
        migrate_now(two_steps(), SQLiteLedger(db), where=" at here")
    assert caught.value.hint == "start afresh"


async def test_the_sqlite_database_migrates_inside_a_running_event_loop(tmp_path: Path) -> None:
    """An app that opens its store from async code (the HTTP service's lifespan) must not need a second loop."""
    database = Database(tmp_path / "anaphora.db")
    try:
        assert [r[0] for r in database.query("SELECT name FROM schema_migrations")] == MIGRATIONS.names
    finally:
        database.close()


class SuspendingLedger:
    """A ledger that really waits: it belongs with ``await migrate(...)``, not the synchronous runner."""

    async def applied(self) -> list[str]:
        await asyncio.sleep(0)
        return []

    async def apply(self, name: str, step: Callable, number: int) -> None:
        raise AssertionError("never reached")


async def test_the_synchronous_runner_refuses_a_ledger_that_suspends() -> None:
    with pytest.raises(RuntimeError, match="await migrate"):
        migrate_now(two_steps(), SuspendingLedger())


def test_a_database_of_then_keeps_its_memory_tables_and_steps(tmp_path: Path) -> None:
    """Before the memory store kept its own ledger the database's recorded all seven steps: opened now, no step
    runs again (each would fail: its tables exist) and the memory store adopts its three."""
    from anaphora.memory.sqlite_schema import LEDGER
    from anaphora.memory.sqlite_schema import MIGRATIONS as MEMORY_STEPS
    from anaphora.memory.sqlite_store import SQLiteMemoryStore
    from anaphora.store.sqlite_database import MIGRATIONS as STORE_STEPS
    from anaphora.store.sqlite_database import NUMBERED

    path = tmp_path / "anaphora.db"
    database = Database(path)
    SQLiteMemoryStore(database)
    with database.transaction() as db:
        db.execute(f"DROP TABLE {LEDGER}")
        db.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [(n,) for n in MEMORY_STEPS.names])
    database.close()
    database = Database(path)
    try:
        SQLiteMemoryStore(database)
        later = [name for name in STORE_STEPS.names if name not in NUMBERED]  # recorded by name from the start
        recorded = sorted(r[0] for r in database.query("SELECT name FROM schema_migrations"))
        assert recorded == sorted([*NUMBERED, *later])
        assert [r[0] for r in database.query(f"SELECT name FROM {LEDGER}")] == MEMORY_STEPS.names
    finally:
        database.close()
