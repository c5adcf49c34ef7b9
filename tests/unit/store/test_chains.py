"""Conversation chains in the library (anaphora.store.chains) and through the facade: continue a response's chain,
branch it, add turns answered elsewhere, discard what a failed turn would leave; nothing is written before a turn
is answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.errors import InputError, NotFoundError
from anaphora.store import Database, NewTurn, SQLiteConversationStore, chains
from anaphora.testing.store_contract import make_turn
from anaphora.turn_ids import parse_response_id, response_id
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit
DEMO = ["How do I install Kestrel on Kubernetes?", "And on ARM?", "What about its memory limits?"]


@pytest.fixture
def store(tmp_path: Path):
    database = Database(tmp_path / "chains.db")
    yield SQLiteConversationStore(database)
    database.close()


@pytest.fixture
def chat(tmp_path: Path):
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        rewriter="expansion",
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        rag.ingest([SAMPLE_DOCS])
        yield rag


def questions(rag: Anaphora, conversation: str) -> list[str]:
    return [t.question for t in rag.turns(conversation)]


def test_a_library_user_continues_and_branches_a_chain(chat: Anaphora) -> None:
    first = chat.ask(DEMO[0], chat.new_conversation())
    conversation = first.conversation_id
    second = chat.ask(DEMO[1], continue_from=response_id(conversation, 0))  # the latest: appended
    assert (second.conversation_id, second.turn_index) == (conversation, 1)
    assert second.trace.query != DEMO[1]  # the chain was its history

    branched = chat.ask(DEMO[2], continue_from=response_id(conversation, 0))  # an earlier one: a branch
    assert branched.conversation_id != conversation and branched.turn_index == 1
    assert questions(chat, branched.conversation_id) == [DEMO[0], DEMO[2]]
    assert questions(chat, conversation) == DEMO[:2]  # the original keeps every turn
    chain = chat.chain(response_id(branched.conversation_id, 1))
    assert [t.question for t in chain] == [DEMO[0], DEMO[2]] and chain[0] == chat.turns(conversation)[0]
    assert [t.index for t in chat.chain(response_id(conversation, 1), last=1)] == [1]

    copy = chat.branch(response_id(conversation, 1), title="a copy")
    assert questions(chat, copy) == DEMO[:2] and chat.turns(copy) == chat.turns(conversation)
    assert {c.id: c.title for c in chat.conversations()}[copy] == "a copy"
    following = chat.ask("How do I check whether it was OOMKilled?", copy)
    assert following.turn_index == 2 and len(chat.turns(conversation)) == 2


def test_a_turn_refused_while_branching_stores_nothing(chat: Anaphora) -> None:
    conversation = chat.ask(DEMO[0], chat.new_conversation()).conversation_id
    chat.ask(DEMO[1], conversation)
    before = chat.conversations()
    with pytest.raises(InputError, match="empty"):
        chat.ask("<|user|>", continue_from=response_id(conversation, 0))  # empty once sanitized
    with pytest.raises(NotFoundError, match="no response"):
        chat.ask(DEMO[2], continue_from=response_id(conversation, 7))
    with pytest.raises(InputError, match="continue_from"):
        chat.ask(DEMO[2], conversation, continue_from=response_id(conversation, 0))
    assert chat.conversations() == before


def test_a_chain_of_another_user_or_a_malformed_id_is_not_found(chat: Anaphora) -> None:
    conversation = chat.ask(DEMO[0], chat.new_conversation()).conversation_id
    for response, user in ((response_id(conversation, 0), "mallory"), ("resp_x", "local"), ("nope", "local")):
        with pytest.raises(NotFoundError, match="no response"):
            chat.chain(response, user_id=user)
        with pytest.raises(NotFoundError, match="no response"):
            chat.branch(response, user_id=user)
    assert chat.conversations(user_id="mallory") == []


async def test_placing_a_turn_writes_nothing_and_the_turn_writes_its_prelude_at_once(store) -> None:
    original = await store.create("alice")
    await store.extend("alice", original.id, [make_turn(n) for n in range(4)])
    seeded = [NewTurn(question="asked elsewhere?", answer="answered elsewhere")]
    place = await chains.place_turn(store, "alice", previous_response=response_id(original.id, 1), seeded=seeded)
    assert place.index == 3 and place.prelude.start.upto == 2
    assert [c.id for c in await store.list("alice")] == [original.id]  # nothing yet

    before = await chains.history_before(store, "alice", place.conversation_id, place.prelude, last=2)
    assert (before.conversation_id, before.prelude, before.turns_before) == (place.conversation_id, place.prelude, 3)
    assert [(t.index, t.question) for t in before.recent] == [(1, "question 1?"), (2, "asked elsewhere?")]
    stored = await chains.write_turn(store, "alice", place.conversation_id, place.prelude, make_turn(9))
    assert stored.index == 3
    turns = await store.turns("alice", place.conversation_id)
    assert [t.question for t in turns] == ["question 0?", "question 1?", "asked elsewhere?", "question 9?"]
    assert turns[2].trace.route_reason == "added as items"

    tail = await chains.place_turn(store, "alice", previous_response=response_id(original.id, 3))
    assert (tail.conversation_id, tail.index, tail.prelude.start, tail.prelude.after) == (original.id, 4, None, 3)
    new = await chains.place_turn(store, "alice")
    assert new.index == 0 and new.prelude.start is not None and new.prelude.start.parent is None
    with pytest.raises(NotFoundError):
        await chains.place_turn(store, "bob", conversation_id=original.id)


async def test_append_answered_is_all_or_none_and_says_the_turns_were_added(store) -> None:
    conversation = await store.create("alice")
    stored = await chains.append_answered(store, "alice", conversation.id, chains.answered_elsewhere([("q?", "a")]))
    assert stored[0].trace.route_reason == "added as items" and stored[0].trace.answer_source == "none"
    with pytest.raises(NotFoundError):
        await chains.append_answered(store, "bob", conversation.id, [NewTurn(question="q", answer="a")])
    assert (await store.get("alice", conversation.id)).turn_count == 1


async def test_discard_if_unanswered_removes_only_a_conversation_without_the_turn(store) -> None:
    original = await store.create("alice")
    await store.extend("alice", original.id, [make_turn(n) for n in range(3)])
    branch = await chains.branch(store, "alice", response_id(original.id, 1))
    assert branch.turn_count == 2 and branch.title == "question 0?"
    assert not await chains.discard_if_unanswered(store, "alice", original.id, 2)  # it holds turn 2
    assert await chains.discard_if_unanswered(store, "alice", branch.id, 2)  # the turn that failed: gone
    assert not await chains.discard_if_unanswered(store, "alice", branch.id, 2)  # already gone
    assert [c.id for c in await store.list("alice")] == [original.id]


def test_the_response_id_round_trips() -> None:
    assert parse_response_id(response_id("ab_c", 12)) == ("ab_c", 12)
    assert parse_response_id("resp_abc") is None and parse_response_id("msg_a_1") is None


async def test_a_turn_continuing_a_response_that_others_followed_meanwhile_branches_from_it(store) -> None:
    """Two requests continue the same latest response: the one that runs second finds a turn after it and is stored
    as a branch from that response, so each response's previous is the one its request named."""
    original = await store.create("alice")
    await store.extend("alice", original.id, [make_turn(n) for n in range(4)])
    first = await chains.place_turn(store, "alice", previous_response=response_id(original.id, 3))
    second = await chains.place_turn(store, "alice", previous_response=response_id(original.id, 3))
    ran = await chains.history_before(store, "alice", first.conversation_id, first.prelude, last=8)
    await chains.write_turn(store, "alice", ran.conversation_id, ran.prelude, make_turn(10))
    raced = await chains.history_before(store, "alice", second.conversation_id, second.prelude, last=8)
    assert raced.conversation_id != original.id and raced.turns_before == 4
    assert [t.index for t in raced.recent] == [0, 1, 2, 3] and raced.prelude.start.upto == 4
    stored = await chains.write_turn(store, "alice", raced.conversation_id, raced.prelude, make_turn(11))
    assert stored.index == 4
    assert [t.question for t in await store.turns("alice", original.id)][3:] == ["question 3?", "question 10?"]
    branched = await store.turns("alice", raced.conversation_id)
    assert [t.question for t in branched][3:] == ["question 3?", "question 11?"]
