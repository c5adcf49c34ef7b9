"""SQLiteConversationStore: CRUD, ordering, pagination, turn indexes and per-user isolation, checked against the
SQLite rows themselves (the backend-neutral rules are in anaphora.testing.store_contract, whose helpers this uses)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import anaphora.store.sqlite_conversations as conversations_module
from anaphora.errors import NotFoundError
from anaphora.store import Conversation, Database, SQLiteConversationStore
from anaphora.testing.store_contract import ALICE, BOB, add_turn, make_trace
from anaphora.types import Citation

pytestmark = pytest.mark.unit


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "anaphora.db")
    yield database
    database.close()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A strictly increasing clock so updated_at ordering is deterministic."""
    ticks = itertools.count(1000.0, 1.0)
    fake = SimpleNamespace(time=lambda: next(ticks))
    monkeypatch.setattr(conversations_module, "time", fake)
    return fake


@pytest.fixture
def store(db: Database, clock: SimpleNamespace) -> SQLiteConversationStore:
    return SQLiteConversationStore(db)


def turn_rows(db: Database) -> int:
    return db.query("SELECT COUNT(*) AS n FROM turns")[0]["n"]


async def test_create_and_get(store: SQLiteConversationStore):
    created = await store.create(ALICE, "My title")
    assert isinstance(created, Conversation)
    assert created.user_id == ALICE and created.title == "My title" and created.turn_count == 0
    assert created.created_at == created.updated_at
    fetched = await store.get(ALICE, created.id)
    assert fetched == created


async def test_create_gives_unique_ids(store: SQLiteConversationStore):
    ids = {(await store.create(ALICE)).id for _ in range(20)}
    assert len(ids) == 20


async def test_get_missing_raises_not_found(store: SQLiteConversationStore):
    with pytest.raises(NotFoundError, match="nope"):
        await store.get(ALICE, "nope")


async def test_list_orders_by_updated_at_desc_and_paginates(store: SQLiteConversationStore):
    first = await store.create(ALICE, "first")
    second = await store.create(ALICE, "second")
    third = await store.create(ALICE, "third")
    await store.create(BOB, "bob's")
    assert [c.title for c in await store.list(ALICE)] == ["third", "second", "first"]

    await add_turn(store, ALICE, first.id, 0)  # touching a conversation moves it to the top
    listed = await store.list(ALICE)
    assert [c.id for c in listed] == [first.id, third.id, second.id]
    assert [c.turn_count for c in listed] == [1, 0, 0]

    assert [c.id for c in await store.list(ALICE, limit=2)] == [first.id, third.id]
    assert [c.id for c in await store.list(ALICE, limit=2, offset=2)] == [second.id]
    assert await store.list(ALICE, limit=2, offset=3) == []
    assert await store.list("nobody") == []


async def test_append_turn_indexes_from_zero_without_gaps(store: SQLiteConversationStore):
    conversation = await store.create(ALICE)
    appended = [await add_turn(store, ALICE, conversation.id, n) for n in range(5)]
    assert [t.index for t in appended] == [0, 1, 2, 3, 4]
    turns = await store.turns(ALICE, conversation.id)
    assert [t.index for t in turns] == [0, 1, 2, 3, 4]
    assert [t.question for t in turns] == [f"question {n}?" for n in range(5)]
    assert (await store.get(ALICE, conversation.id)).turn_count == 5


async def test_turn_round_trips_citations_and_trace(store: SQLiteConversationStore):
    conversation = await store.create(ALICE)
    appended = await add_turn(store, ALICE, conversation.id, 0)
    [stored] = await store.turns(ALICE, conversation.id)
    assert stored.answer == "answer 0"
    assert stored.citations == [Citation(id="doc.md#0", source="doc.md", heading="H")]
    assert stored.trace == make_trace("question 0?")
    assert stored.trace.retrieved[0].bm25_score == 1.5
    assert stored == appended


async def test_turns_last_n(store: SQLiteConversationStore):
    conversation = await store.create(ALICE)
    for n in range(6):
        await add_turn(store, ALICE, conversation.id, n)
    assert [t.index for t in await store.turns(ALICE, conversation.id, last=2)] == [4, 5]
    assert [t.index for t in await store.turns(ALICE, conversation.id, last=10)] == [0, 1, 2, 3, 4, 5]
    assert await store.turns(ALICE, conversation.id, last=0) == []


async def test_first_question_becomes_the_title_and_bumps_updated_at(store: SQLiteConversationStore):
    untitled = await store.create(ALICE)
    await add_turn(store, ALICE, untitled.id, 0)
    await add_turn(store, ALICE, untitled.id, 1)
    fetched = await store.get(ALICE, untitled.id)
    assert fetched.title == "question 0?"
    assert fetched.updated_at > untitled.updated_at
    titled = await store.create(ALICE, "Keep me")
    await add_turn(store, ALICE, titled.id, 0)
    assert (await store.get(ALICE, titled.id)).title == "Keep me"


async def test_delete_removes_conversation_and_turns(store: SQLiteConversationStore, db: Database):
    conversation = await store.create(ALICE)
    await add_turn(store, ALICE, conversation.id, 0)
    await store.delete(ALICE, conversation.id)
    with pytest.raises(NotFoundError):
        await store.get(ALICE, conversation.id)
    assert turn_rows(db) == 0
    with pytest.raises(NotFoundError):
        await store.delete(ALICE, conversation.id)


async def test_append_to_missing_conversation_writes_nothing(store: SQLiteConversationStore, db: Database):
    with pytest.raises(NotFoundError):
        await add_turn(store, ALICE, "does-not-exist", 0)
    assert turn_rows(db) == 0


async def test_other_users_conversation_is_not_found(store: SQLiteConversationStore, db: Database):
    conversation = await store.create(ALICE, "private")
    await add_turn(store, ALICE, conversation.id, 0)

    with pytest.raises(NotFoundError):
        await store.get(BOB, conversation.id)
    with pytest.raises(NotFoundError):
        await store.turns(BOB, conversation.id)
    with pytest.raises(NotFoundError):
        await add_turn(store, BOB, conversation.id, 1)
    with pytest.raises(NotFoundError):
        await store.delete(BOB, conversation.id)
    assert await store.list(BOB) == []

    # Alice's data is untouched by Bob's attempts.
    fetched = await store.get(ALICE, conversation.id)
    assert fetched.turn_count == 1
    assert turn_rows(db) == 1
    assert [t.index for t in await store.turns(ALICE, conversation.id)] == [0]


async def test_not_found_message_does_not_reveal_owner(store: SQLiteConversationStore):
    conversation = await store.create(ALICE, "secret title")
    with pytest.raises(NotFoundError) as caught:
        await store.get(BOB, conversation.id)
    assert ALICE not in str(caught.value)
    assert "secret title" not in str(caught.value)


async def test_conversations_survive_reopen(tmp_path: Path, clock: SimpleNamespace):
    path = tmp_path / "persist.db"
    first = Database(path)
    conversation = await SQLiteConversationStore(first).create(ALICE, "kept")
    await add_turn(SQLiteConversationStore(first), ALICE, conversation.id, 0)
    first.close()
    second = Database(path)
    try:
        store = SQLiteConversationStore(second)
        assert (await store.get(ALICE, conversation.id)).title == "kept"
        assert len(await store.turns(ALICE, conversation.id)) == 1
    finally:
        second.close()
