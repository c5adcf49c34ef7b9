"""Turns stored before ``shown_passages`` and ``window_start`` were explicit get them from their trace, once: the
SQLite migration writes them (nothing else of the turn changes), and the rule reads the stored JSON of that time."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from anaphora.store import Database, SQLiteConversationStore
from anaphora.store.sqlite_database import MIGRATIONS
from anaphora.store.turn_fields import fields_from_trace
from anaphora.types import BudgetDecision, Passage, TurnTrace

pytestmark = pytest.mark.unit

STEP = "m006_turn_window_fields"
PASSAGES = [Passage(id=f"doc.md#{n}", text=f"passage {n}", source="doc.md", heading="H", score=0.5) for n in range(3)]


def budget(turns_kept: int, passages_kept: int) -> BudgetDecision:
    zero = dict.fromkeys(("budget", "used", "system", "summary", "question", "passages", "history"), 0)
    counts = {"passages_dropped": 0, "turns_available": turns_kept, "turns_evicted_for_budget": 0}
    return BudgetDecision(**zero, **counts, turns_beyond_window=0, turns_kept=turns_kept, passages_kept=passages_kept)


def old_trace(**fields) -> dict:
    return json.loads(TurnTrace(question="q?", retrieved=PASSAGES, **fields).model_dump_json())


def test_the_rule_of_the_old_traces() -> None:
    shown, start = fields_from_trace(old_trace(budget=budget(turns_kept=2, passages_kept=2)), 5)
    assert [Passage.model_validate(p) for p in shown] == PASSAGES[:2]
    assert start == 3
    shown, start = fields_from_trace(old_trace(budget=budget(turns_kept=9, passages_kept=3)), 4)
    assert len(shown) == 3 and start == 0  # never before turn 0
    assert fields_from_trace(old_trace(budget=budget(1, 3), retrieval_skipped=True), 4) == ([], 3)
    assert fields_from_trace(old_trace(budget=budget(1, 3), abstained=True), 4) == ([], 3)
    assert fields_from_trace(old_trace(), 4) == ([], None)  # no budget: nothing known
    assert fields_from_trace(None, 4) == ([], None)


def old_store(path: Path) -> sqlite3.Connection:
    """A database as the version before the step left it: every earlier step run, and recorded."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("BEGIN")
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, step in MIGRATIONS[: MIGRATIONS.names.index(STEP)]:
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    conn.execute(f"PRAGMA user_version = {MIGRATIONS.names.index(STEP)}")
    conn.execute("COMMIT")
    return conn


async def test_the_migration_writes_the_fields_from_each_old_trace(tmp_path: Path) -> None:
    path = tmp_path / "anaphora.db"
    conn = old_store(path)
    conn.execute("INSERT INTO conversations VALUES ('c1', 'local', 'T', 0, 0)")
    traces = [
        TurnTrace(question="q0?", retrieved=PASSAGES, budget=budget(0, 2)).model_dump_json(),
        TurnTrace(question="q1?", retrieved=PASSAGES, budget=budget(1, 3), retrieval_skipped=True).model_dump_json(),
        "null",  # a turn stored with no trace
        TurnTrace(question="q3?", retrieved=PASSAGES, budget=budget(2, 1)).model_dump_json(),
    ]
    for index, trace in enumerate(traces):
        conn.execute("INSERT INTO turns VALUES ('c1', ?, ?, 'a', '[]', ?, 0)", (index, f"q{index}?", trace))
    conn.close()

    database = Database(path)
    try:
        turns = await SQLiteConversationStore(database).turns("local", "c1")
        assert [t.shown_passages for t in turns] == [PASSAGES[:2], [], [], PASSAGES[:1]]
        assert [t.window_start for t in turns] == [0, 0, None, 1]
        stored = [r["trace"] for r in database.query("SELECT trace FROM turns ORDER BY idx")]
        assert stored == traces  # the audit record is left exactly as it was
        assert STEP in [r["name"] for r in database.query("SELECT name FROM schema_migrations")]
    finally:
        database.close()
