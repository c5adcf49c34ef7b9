"""Episodes from before issue 24 held the question and the assistant's answer; the memory store's migration leaves
them the user's words only (as many lines as the stored turn's question), so no earlier answer is quoted as memory
or found by its words. Through a real SQLite file laid out as a database of then: the memory steps recorded in the
database's own ledger (before the memory store kept its own), the last one not yet applied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.store import Database
from anaphora.testing.memory_contract import episode

pytestmark = pytest.mark.unit
STEP = "m007_episodes_keep_the_users_words"


def stored_turn(db: Database, conversation: str, index: int, question: str, answer: str) -> None:
    with db.transaction() as tx:
        tx.execute(
            "INSERT OR IGNORE INTO conversations(id, user_id, title, created_at, updated_at) "
            "VALUES (?, 'alice', '', 0, 0)",
            (conversation,),
        )
        tx.execute(
            "INSERT INTO turns(conversation_id, idx, question, answer, citations, trace, created_at) "
            "VALUES (?, ?, ?, ?, '[]', ?, 0)",
            (conversation, index, question, answer, json.dumps(None)),
        )


async def test_old_episodes_keep_only_the_users_words(tmp_path: Path) -> None:
    path = tmp_path / "anaphora.db"
    db = Database(path)
    store = SQLiteMemoryStore(db)
    answer = "Retention is set with retention_period in the compactor block. [loki/retention.md#3]"
    stored_turn(db, "c1", 0, "how do I turn on retention?", answer)
    stored_turn(db, "c1", 1, "my config:\nlimits_config:\n  retention_period: 90d", "That keeps 90 days.")
    old = [
        episode("alice", f"how do I turn on retention?\n{answer}", conversation="c1", turn=0),
        episode("alice", "my config:\nlimits_config:\n  retention_period: 90d\nThat keeps 90 days.", turn=1),
        episode("alice", "I run Loki 2.9\nGood to know: Loki 2.9 supports TSDB.", conversation="gone", turn=4),
        episode("alice", "what is new in 3.0?", conversation="c1", turn=2),  # already the user's words
    ]
    await store.add("alice", old)
    assert (await store.lexical("alice", ["compactor"], 5))[0]  # before: the answer's words are searchable
    with db.transaction() as tx:  # what the ledgers of a database from before issue 24 held
        tx.execute("DROP TABLE memory_migrations")
        tx.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [("m004_memory",), ("m005_memory_epochs",)])
    db.close()

    db = Database(path)
    store = SQLiteMemoryStore(db)  # adopts the two steps the database recorded, runs the third
    assert [r[0] for r in db.query("SELECT name FROM memory_migrations")] == [
        "m004_memory",
        "m005_memory_epochs",
        STEP,
    ]
    texts = [i.text for i in (await store.get_many("alice", [e.id for e in old])).values()]
    assert sorted(texts) == sorted(
        [
            "how do I turn on retention?",
            "my config:\nlimits_config:\n  retention_period: 90d",
            "I run Loki 2.9",  # its conversation is gone: the first line
            "what is new in 3.0?",
        ]
    )
    assert (await store.lexical("alice", ["compactor"], 5))[0] == []
    assert (await store.lexical("alice", ["TSDB"], 5))[0] == []
    db.close()
