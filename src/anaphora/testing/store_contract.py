"""The contract every conversation-store backend must honour, as a pytest suite to subclass.

Like Haystack's ``DocumentStoreBaseTests``: a backend's test module subclasses :class:`ConversationStoreContract`
and provides a ``store`` fixture that yields an *empty*, ready store implementing
:class:`~anaphora.store.ConversationStore` and :class:`~anaphora.store.SummaryStore`, plus ``erase_user`` and
``delete_inactive``::

    import pytest
    from anaphora.testing.store_contract import ConversationStoreContract

    class TestMyStore(ConversationStoreContract):
        @pytest.fixture
        async def store(self):
            store = MyStore(...)
            yield store
            await store.aclose()

Optionally override :meth:`ConversationStoreContract.failing_append` so that the mid-append rollback test runs.
The tests are ``async`` and need pytest-asyncio (``asyncio_mode = "auto"`` or a ``pytest.mark.asyncio`` on the
subclass). Timestamps come from the records the store returns, never from sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from anaphora.errors import ConversationExistsError, NotFoundError, TurnNotFoundError
from anaphora.store.protocols import ChainStart, HistoryStore, NewTurn, new_conversation_id
from anaphora.types import Citation, Passage, StageRecord, TurnTrace

ALICE, BOB = "alice", "bob"
CONCURRENT_APPENDS = 12


def make_trace(question: str) -> TurnTrace:
    return TurnTrace(
        question=question,
        query=question.lower(),
        alternate_queries=[f"{question} alt"],
        retrieved=[Passage(id="a.md#1", text="t", source="a.md", heading="H", score=0.5, bm25_score=1.5)],
        stages=[StageRecord(name="retrieve", ms=1.25)],
        model_calls=1,
    )


def make_turn(n: int, **fields: Any) -> NewTurn:
    question = f"question {n}?"
    citations = [Citation(id=f"doc.md#{n}", source="doc.md", heading="H")]
    return NewTurn(question=question, answer=f"answer {n}", citations=citations, trace=make_trace(question), **fields)


async def add_turn(store: HistoryStore, user: str, conversation_id: str, n: int):
    return await store.append_turn(user, conversation_id, make_turn(n))


def turn_of(question: str, answer: str = "a", trace: TurnTrace | None = None) -> NewTurn:
    return NewTurn(question=question, answer=answer, trace=trace if trace is not None else make_trace(question))


class _UnserialisableTrace(TurnTrace):
    """A trace that fails when the store serialises it, i.e. inside ``append_turn``."""

    def model_dump_json(self, **kwargs: Any) -> str:
        raise RuntimeError("trace cannot be serialised")

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("trace cannot be serialised")


class ConversationStoreContract:
    """Subclass and provide a ``store`` fixture (an empty store); every test below must pass unchanged."""

    @pytest.fixture
    def store(self) -> HistoryStore:  # pragma: no cover - overridden
        raise NotImplementedError("a ConversationStoreContract subclass must provide a `store` fixture")

    @asynccontextmanager
    async def failing_append(self, store: HistoryStore) -> AsyncIterator[None]:
        """While open, make ``append_turn`` fail *after* it has written something (e.g. a database trigger that
        raises on its last write). The default skips the test that needs it."""
        pytest.skip("this backend does not provide a way to fail an append half-way")
        yield

    # --- create / get / list -------------------------------------------------------------------------------

    async def test_create_and_get(self, store):
        created = await store.create(ALICE, "My title")
        assert created.user_id == ALICE and created.title == "My title" and created.turn_count == 0
        assert created.created_at == created.updated_at
        assert abs(created.created_at - time.time()) < 3600
        assert await store.get(ALICE, created.id) == created

    async def test_create_without_title(self, store):
        created = await store.create(ALICE)
        assert created.title == ""
        assert (await store.get(ALICE, created.id)).title == ""

    async def test_create_gives_unique_ids(self, store):
        ids = {(await store.create(ALICE)).id for _ in range(20)}
        assert len(ids) == 20

    async def test_rename_sets_the_title_only_for_the_owner(self, store):
        created = await store.create(ALICE, "before")
        renamed = await store.rename(ALICE, created.id, "after")
        assert renamed.title == "after" and renamed.updated_at == created.updated_at
        assert (await store.get(ALICE, created.id)).title == "after"
        with pytest.raises(NotFoundError):
            await store.rename(BOB, created.id, "stolen")
        with pytest.raises(NotFoundError):
            await store.rename(ALICE, "nope", "x")
        assert (await store.get(ALICE, created.id)).title == "after"

    async def test_get_missing_raises_not_found(self, store):
        with pytest.raises(NotFoundError, match="nope"):
            await store.get(ALICE, "nope")

    async def test_list_orders_by_activity_and_paginates(self, store):
        first = await store.create(ALICE, "first")
        second = await store.create(ALICE, "second")
        third = await store.create(ALICE, "third")
        await store.create(BOB, "bob's")
        assert [c.id for c in await store.list(ALICE)] == [third.id, second.id, first.id]

        await add_turn(store, ALICE, first.id, 0)  # activity moves a conversation to the top
        listed = await store.list(ALICE)
        assert [c.id for c in listed] == [first.id, third.id, second.id]
        assert [c.turn_count for c in listed] == [1, 0, 0]
        assert listed[0] == await store.get(ALICE, first.id)

        assert [c.id for c in await store.list(ALICE, limit=2)] == [first.id, third.id]
        assert [c.id for c in await store.list(ALICE, limit=2, offset=2)] == [second.id]
        assert await store.list(ALICE, limit=2, offset=3) == []
        assert await store.list("nobody") == []

    async def test_list_pages_cover_everything_once(self, store):
        created = {(await store.create(ALICE, f"c{n}")).id for n in range(7)}
        seen: list[str] = []
        offset = 0
        while page := await store.list(ALICE, limit=3, offset=offset):
            assert len(page) <= 3
            seen += [c.id for c in page]
            offset += len(page)
        assert sorted(seen) == sorted(created)

    # --- turns ----------------------------------------------------------------------------------------------

    async def test_append_turn_indexes_from_zero_without_gaps(self, store):
        conversation = await store.create(ALICE)
        appended = [await add_turn(store, ALICE, conversation.id, n) for n in range(5)]
        assert [t.index for t in appended] == [0, 1, 2, 3, 4]
        turns = await store.turns(ALICE, conversation.id)
        assert [t.index for t in turns] == [0, 1, 2, 3, 4]
        assert [t.question for t in turns] == [f"question {n}?" for n in range(5)]
        assert (await store.get(ALICE, conversation.id)).turn_count == 5

    async def test_turn_round_trips_citations_and_trace(self, store):
        conversation = await store.create(ALICE)
        appended = await add_turn(store, ALICE, conversation.id, 0)
        [stored] = await store.turns(ALICE, conversation.id)
        assert stored == appended
        assert stored.answer == "answer 0"
        assert stored.citations == [Citation(id="doc.md#0", source="doc.md", heading="H")]
        assert stored.trace == make_trace("question 0?")
        assert stored.trace.retrieved[0].bm25_score == 1.5

    async def test_turn_round_trips_what_the_next_turn_reads(self, store):
        """``shown_passages`` and ``window_start`` are stored as given, whatever the trace says (it is audit only),
        and a turn appended without them reads back with none shown and an unknown start."""
        conversation = await store.create(ALICE)
        shown = [
            Passage(id="b.md#2", text="shown", source="b.md", heading="H", score=0.25, bm25_score=2.5),
            Passage(id="c.md#0", text="also", source="c.md", heading="", score=0.125),
        ]
        appended = await store.append_turn(
            ALICE,
            conversation.id,
            NewTurn(question="q?", answer="a", trace=make_trace("q?"), shown_passages=shown, window_start=3),
        )
        await add_turn(store, ALICE, conversation.id, 1)
        first, second = await store.turns(ALICE, conversation.id)
        assert first == appended
        assert first.shown_passages == shown and first.shown_passages[0].bm25_score == 2.5
        assert first.window_start == 3
        assert first.trace.retrieved[0].id == "a.md#1"  # the trace is kept as it was, not consulted
        assert second.shown_passages == [] and second.window_start is None
        [last] = await store.turns(ALICE, conversation.id, last=1)
        assert last == second

    async def test_turn_text_round_trips_exactly(self, store):
        conversation = await store.create(ALICE)
        question = 'Ünïcödé ‘quotes’ "json" \\ back\\slash\nnew line — 日本語 🙂?'
        await store.append_turn(ALICE, conversation.id, turn_of(question, "  spaced  "))
        [stored] = await store.turns(ALICE, conversation.id)
        assert stored.question == question and stored.answer == "  spaced  " and stored.citations == []

    async def test_nul_characters_are_stored_not_refused(self, store):
        """A NUL in a question must not lose the turn; a backend that cannot hold NUL (PostgreSQL text) may store
        U+FFFD in its place, and nothing else may change."""
        conversation = await store.create(ALICE, "ti\x00tle")
        question = "nul\x00inside?"
        await store.append_turn(ALICE, conversation.id, turn_of(question, "an\x00swer"))
        await store.save_summary(ALICE, conversation.id, 1, "sum\x00mary")
        [stored] = await store.turns(ALICE, conversation.id)
        allowed = ("\x00", "\ufffd")
        assert stored.question in {f"nul{c}inside?" for c in allowed}
        assert stored.answer in {f"an{c}swer" for c in allowed}
        assert stored.trace.question in {f"nul{c}inside?" for c in allowed}
        assert (await store.get(ALICE, conversation.id)).title in {f"ti{c}tle" for c in allowed}
        assert (await store.summary(ALICE, conversation.id)).text in {f"sum{c}mary" for c in allowed}

    async def test_turns_last_n(self, store):
        conversation = await store.create(ALICE)
        for n in range(6):
            await add_turn(store, ALICE, conversation.id, n)
        assert [t.index for t in await store.turns(ALICE, conversation.id, last=2)] == [4, 5]
        assert [t.index for t in await store.turns(ALICE, conversation.id, last=1)] == [5]
        assert [t.index for t in await store.turns(ALICE, conversation.id, last=10)] == [0, 1, 2, 3, 4, 5]
        assert await store.turns(ALICE, conversation.id, last=0) == []

    async def test_turns_of_empty_conversation(self, store):
        conversation = await store.create(ALICE)
        assert await store.turns(ALICE, conversation.id) == []
        assert await store.turns(ALICE, conversation.id, last=3) == []

    async def test_first_question_becomes_the_title_and_bumps_updated_at(self, store):
        untitled = await store.create(ALICE)
        first = await add_turn(store, ALICE, untitled.id, 0)
        await add_turn(store, ALICE, untitled.id, 1)
        fetched = await store.get(ALICE, untitled.id)
        assert fetched.title == "question 0?"
        assert fetched.updated_at > untitled.updated_at
        assert fetched.updated_at >= first.created_at
        assert fetched.created_at == untitled.created_at
        titled = await store.create(ALICE, "Keep me")
        await add_turn(store, ALICE, titled.id, 0)
        assert (await store.get(ALICE, titled.id)).title == "Keep me"

    async def test_long_first_question_is_cut_to_80_characters_for_the_title(self, store):
        conversation = await store.create(ALICE)
        question = "why " * 50
        await store.append_turn(ALICE, conversation.id, turn_of(question))
        assert (await store.get(ALICE, conversation.id)).title == question[:80]

    async def test_concurrent_appends_get_distinct_gapless_indexes(self, store):
        conversation = await store.create(ALICE)
        appended = await asyncio.gather(
            *(add_turn(store, ALICE, conversation.id, n) for n in range(CONCURRENT_APPENDS))
        )
        assert sorted(t.index for t in appended) == list(range(CONCURRENT_APPENDS))
        turns = await store.turns(ALICE, conversation.id)
        assert [t.index for t in turns] == list(range(CONCURRENT_APPENDS))
        by_index = {t.index: t.question for t in appended}
        assert [t.question for t in turns] == [by_index[i] for i in range(CONCURRENT_APPENDS)]
        assert (await store.get(ALICE, conversation.id)).turn_count == CONCURRENT_APPENDS

    async def test_concurrent_appends_to_different_conversations(self, store):
        conversations = [await store.create(ALICE) for _ in range(3)]
        await asyncio.gather(*(add_turn(store, ALICE, c.id, n) for n in range(4) for c in conversations))
        for conversation in conversations:
            assert [t.index for t in await store.turns(ALICE, conversation.id)] == [0, 1, 2, 3]

    async def test_append_to_missing_conversation_writes_nothing(self, store):
        with pytest.raises(NotFoundError):
            await add_turn(store, ALICE, "does-not-exist", 0)
        assert await store.erase_user(ALICE) == {"conversations": 0, "turns": 0, "summaries": 0}

    async def test_failed_append_leaves_nothing_written(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        before = await store.get(ALICE, conversation.id)
        bad = _UnserialisableTrace(question="q")
        with pytest.raises(RuntimeError):
            await store.append_turn(ALICE, conversation.id, turn_of("broken?", trace=bad))
        assert await store.get(ALICE, conversation.id) == before
        assert [t.question for t in await store.turns(ALICE, conversation.id)] == ["question 0?"]
        assert (await add_turn(store, ALICE, conversation.id, 1)).index == 1

    async def test_append_failing_half_way_rolls_back(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        before = await store.get(ALICE, conversation.id)
        async with self.failing_append(store):
            with pytest.raises(Exception):  # noqa: B017 - whatever the backend raises
                await add_turn(store, ALICE, conversation.id, 1)
        assert await store.get(ALICE, conversation.id) == before
        assert [t.index for t in await store.turns(ALICE, conversation.id)] == [0]
        assert (await add_turn(store, ALICE, conversation.id, 1)).index == 1

    # --- ranges, extend, chains ------------------------------------------------------------------------------

    async def test_turns_by_range_read_only_that_range(self, store):
        conversation = await store.create(ALICE)
        for n in range(6):
            await add_turn(store, ALICE, conversation.id, n)

        async def indexes(**bounds):
            return [t.index for t in await store.turns(ALICE, conversation.id, **bounds)]

        assert await indexes(start=2, stop=4) == [2, 3]
        assert await indexes(start=4) == [4, 5]
        assert await indexes(stop=3, last=2) == [1, 2]
        assert await indexes(start=1, stop=5, last=10) == [1, 2, 3, 4]
        assert await indexes(start=6) == [] and await indexes(stop=0) == [] and await indexes(stop=3, last=0) == []
        assert await indexes(start=3, stop=99) == [3, 4, 5]
        [third] = await store.turns(ALICE, conversation.id, start=2, stop=3)
        assert third == (await store.turns(ALICE, conversation.id))[2]

    async def test_extend_appends_every_turn_in_order(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        stored = await store.extend(ALICE, conversation.id, [make_turn(1), make_turn(2), make_turn(3)])
        assert [t.index for t in stored] == [1, 2, 3]
        turns = await store.turns(ALICE, conversation.id)
        assert turns[1:] == stored and [t.question for t in turns] == [f"question {n}?" for n in range(4)]
        assert (await store.get(ALICE, conversation.id)).title == "question 0?"
        assert await store.extend(ALICE, conversation.id, []) == []

    async def test_an_extend_that_fails_on_any_turn_writes_none(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        before = await store.get(ALICE, conversation.id)
        bad = turn_of("broken?", trace=_UnserialisableTrace(question="q"))
        with pytest.raises(RuntimeError):
            await store.extend(ALICE, conversation.id, [make_turn(1), bad])
        assert await store.get(ALICE, conversation.id) == before
        opened = new_conversation_id()
        with pytest.raises(RuntimeError):
            await store.extend(ALICE, opened, [make_turn(1), bad], start=ChainStart(title="t"))
        with pytest.raises(NotFoundError):
            await store.get(ALICE, opened)
        assert [c.id for c in await store.list(ALICE)] == [conversation.id]

    async def test_extend_with_a_start_opens_the_conversation_with_its_turns(self, store):
        opened = new_conversation_id()
        stored = await store.extend(ALICE, opened, [make_turn(0), make_turn(1)], start=ChainStart())
        assert [t.index for t in stored] == [0, 1]
        conversation = await store.get(ALICE, opened)
        assert conversation.turn_count == 2 and conversation.title == "question 0?"
        assert [c.id for c in await store.list(ALICE)] == [opened]
        assert await store.turns(ALICE, opened) == stored
        titled = new_conversation_id()
        await store.extend(ALICE, titled, [], start=ChainStart(title="kept"))
        assert (await store.get(ALICE, titled)).title == "kept"
        assert (await add_turn(store, ALICE, titled, 0)).index == 0

    async def test_a_start_under_a_taken_id_is_refused_and_changes_nothing(self, store):
        taken = await store.create(BOB, "bob's")
        with pytest.raises(ConversationExistsError):
            await store.extend(ALICE, taken.id, [make_turn(0)], start=ChainStart())
        assert await store.get(BOB, taken.id) == taken
        assert await store.list(ALICE) == []

    async def test_a_branch_holds_the_chain_up_to_its_point_and_leaves_the_original(self, store):
        original = await store.create(ALICE, "the original")
        shown = [Passage(id="b.md#2", text="shown", source="b.md", heading="H", score=0.25)]
        for n in range(5):
            await store.append_turn(ALICE, original.id, make_turn(n, shown_passages=shown, window_start=n // 2))
        before = await store.turns(ALICE, original.id)
        branched = new_conversation_id()
        start = ChainStart(parent=original.id, upto=3)
        [answered] = await store.extend(ALICE, branched, [make_turn(9)], start=start)
        assert answered.index == 3
        turns = await store.turns(ALICE, branched)
        assert turns[:3] == before[:3]  # copied as they are: what the next turn reads, their traces and times
        assert turns[3] == answered and turns[3].question == "question 9?"
        assert (await store.get(ALICE, branched)).title == "the original"
        assert await store.turns(ALICE, original.id) == before
        assert (await store.get(ALICE, original.id)).turn_count == 5
        assert (await add_turn(store, ALICE, branched, 10)).index == 4
        assert await store.erase_user(ALICE) == {"conversations": 2, "turns": 10, "summaries": 0}

    async def test_a_branch_of_a_missing_short_or_other_users_chain_is_not_found_and_opens_nothing(self, store):
        alices = await store.create(ALICE)
        for n in range(2):
            await add_turn(store, ALICE, alices.id, n)
        for user, parent, upto in ((BOB, alices.id, 1), (ALICE, "missing", 1), (ALICE, alices.id, 3)):
            opened = new_conversation_id()
            with pytest.raises(NotFoundError):
                await store.extend(user, opened, [make_turn(5)], start=ChainStart(parent=parent, upto=upto))
            with pytest.raises(NotFoundError):
                await store.get(user, opened)
        assert await store.list(BOB) == []
        assert [c.id for c in await store.list(ALICE)] == [alices.id]
        assert (await store.get(ALICE, alices.id)).turn_count == 2

    async def test_concurrent_branches_of_one_chain(self, store):
        original = await store.create(ALICE)
        await store.extend(ALICE, original.id, [make_turn(n) for n in range(6)])
        ids = [new_conversation_id() for _ in range(CONCURRENT_APPENDS)]
        starts = [ChainStart(parent=original.id, upto=1 + n % 6) for n in range(CONCURRENT_APPENDS)]
        await asyncio.gather(
            *(store.extend(ALICE, ids[n], [make_turn(20 + n)], start=starts[n]) for n in range(CONCURRENT_APPENDS))
        )
        for n, (opened, start) in enumerate(zip(ids, starts, strict=True)):
            turns = await store.turns(ALICE, opened)
            assert [t.index for t in turns] == list(range(start.upto + 1))
            assert turns[-1].question == f"question {20 + n}?"

    async def test_a_write_that_opens_a_conversation_and_fails_half_way_leaves_none(self, store):
        original = await store.create(ALICE)
        await add_turn(store, ALICE, original.id, 0)
        before = await store.get(ALICE, original.id)
        opened = new_conversation_id()
        async with self.failing_append(store):
            with pytest.raises(Exception):  # noqa: B017 - whatever the backend raises
                await store.extend(ALICE, opened, [make_turn(1)], start=ChainStart(parent=original.id, upto=1))
        with pytest.raises(NotFoundError):
            await store.get(ALICE, opened)
        assert await store.list(ALICE) == [before]
        assert await store.erase_user(ALICE) == {"conversations": 1, "turns": 1, "summaries": 0}

    # --- isolation ------------------------------------------------------------------------------------------

    async def test_other_users_conversation_is_not_found_on_every_method(self, store):
        conversation = await store.create(ALICE, "private")
        await add_turn(store, ALICE, conversation.id, 0)
        await store.save_summary(ALICE, conversation.id, 1, "alice's summary")

        with pytest.raises(NotFoundError):
            await store.get(BOB, conversation.id)
        with pytest.raises(NotFoundError):
            await store.turns(BOB, conversation.id)
        with pytest.raises(NotFoundError):
            await store.turns(BOB, conversation.id, last=1)
        with pytest.raises(NotFoundError):
            await add_turn(store, BOB, conversation.id, 1)
        with pytest.raises(NotFoundError):
            await store.delete(BOB, conversation.id)
        with pytest.raises(NotFoundError):
            await store.summary(BOB, conversation.id)
        with pytest.raises(NotFoundError):
            await store.save_summary(BOB, conversation.id, 5, "bob's overwrite")
        assert await store.list(BOB) == []
        assert await store.erase_user(BOB) == {"conversations": 0, "turns": 0, "summaries": 0}

        fetched = await store.get(ALICE, conversation.id)
        assert fetched.turn_count == 1 and fetched.title == "private"
        assert [t.index for t in await store.turns(ALICE, conversation.id)] == [0]
        assert (await store.summary(ALICE, conversation.id)).text == "alice's summary"

    async def test_missing_conversation_is_not_found_on_every_method(self, store):
        for call in (
            store.get(ALICE, "missing"),
            store.turns(ALICE, "missing"),
            store.delete(ALICE, "missing"),
            store.summary(ALICE, "missing"),
            store.save_summary(ALICE, "missing", 1, "s"),
        ):
            with pytest.raises(NotFoundError):
                await call

    async def test_an_id_holding_a_nul_is_not_found_on_every_method(self, store):
        """No store can hold such an id (PostgreSQL text refuses NUL): not found, never a database error."""
        conversation = await store.create(ALICE, "real")
        for user, conversation_id in (
            (ALICE, "a\x00b"),
            (ALICE, conversation.id + "\x00"),
            ("al\x00ice", conversation.id),
        ):
            for call in (
                store.get(user, conversation_id),
                store.turns(user, conversation_id),
                store.rename(user, conversation_id, "t"),
                store.delete(user, conversation_id),
                store.summary(user, conversation_id),
                add_turn(store, user, conversation_id, 0),
            ):
                with pytest.raises(NotFoundError):
                    await call
        assert (await store.get(ALICE, conversation.id)).turn_count == 0

    async def test_not_found_message_does_not_reveal_owner(self, store):
        conversation = await store.create(ALICE, "secret title")
        for call in (store.get(BOB, conversation.id), add_turn(store, BOB, conversation.id, 0)):
            with pytest.raises(NotFoundError) as caught:
                await call
            assert ALICE not in str(caught.value)
            assert "secret title" not in str(caught.value)

    # --- delete ---------------------------------------------------------------------------------------------

    async def test_delete_removes_conversation_turns_and_summaries(self, store):
        conversation = await store.create(ALICE)
        kept = await store.create(ALICE, "kept")
        await add_turn(store, ALICE, conversation.id, 0)
        await add_turn(store, ALICE, kept.id, 0)
        await store.save_summary(ALICE, conversation.id, 1, "s")
        await store.delete(ALICE, conversation.id)
        with pytest.raises(NotFoundError):
            await store.get(ALICE, conversation.id)
        with pytest.raises(NotFoundError):
            await store.turns(ALICE, conversation.id)
        with pytest.raises(NotFoundError):
            await store.delete(ALICE, conversation.id)
        assert [c.id for c in await store.list(ALICE)] == [kept.id]
        # only the kept conversation's rows remain: the deleted one's turns and summaries went with it
        assert await store.erase_user(ALICE) == {"conversations": 1, "turns": 1, "summaries": 0}

    # --- summaries ------------------------------------------------------------------------------------------

    async def test_summary_is_none_until_saved(self, store):
        conversation = await store.create(ALICE)
        assert await store.summary(ALICE, conversation.id) is None

    async def test_summary_covering_most_turns_is_current_and_versions_are_kept(self, store):
        conversation = await store.create(ALICE)
        for n in range(6):
            await add_turn(store, ALICE, conversation.id, n)
        await store.save_summary(ALICE, conversation.id, 2, "two")
        assert (await store.summary(ALICE, conversation.id)).text == "two"
        await store.save_summary(ALICE, conversation.id, 4, "four")
        await store.save_summary(ALICE, conversation.id, 3, "three, saved late")
        current = await store.summary(ALICE, conversation.id)
        assert (current.covers_turns, current.text) == (4, "four")
        assert abs(current.created_at - time.time()) < 3600
        counts = await store.erase_user(ALICE)
        assert counts == {"conversations": 1, "turns": 6, "summaries": 3}  # every version was kept

    async def test_saving_the_same_version_again_replaces_its_text(self, store):
        conversation = await store.create(ALICE)
        await store.save_summary(ALICE, conversation.id, 2, "first draft")
        await store.save_summary(ALICE, conversation.id, 2, "second draft")
        current = await store.summary(ALICE, conversation.id)
        assert (current.covers_turns, current.text) == (2, "second draft")
        assert (await store.erase_user(ALICE))["summaries"] == 1

    async def test_saving_a_summary_never_touches_turns(self, store):
        conversation = await store.create(ALICE)
        for n in range(3):
            await add_turn(store, ALICE, conversation.id, n)
        turns = await store.turns(ALICE, conversation.id)
        before = await store.get(ALICE, conversation.id)
        await store.save_summary(ALICE, conversation.id, 3, "all three")
        assert await store.turns(ALICE, conversation.id) == turns
        assert (await store.get(ALICE, conversation.id)).turn_count == before.turn_count

    async def test_summaries_are_per_conversation(self, store):
        one = await store.create(ALICE)
        two = await store.create(ALICE)
        await store.save_summary(ALICE, one.id, 1, "one")
        assert await store.summary(ALICE, two.id) is None
        assert (await store.summary(ALICE, one.id)).text == "one"

    # --- erase_user -----------------------------------------------------------------------------------------

    async def test_erase_user_removes_everything_of_that_user_only(self, store):
        a1 = await store.create(ALICE)
        a2 = await store.create(ALICE)
        b1 = await store.create(BOB, "bob's")
        for n in range(3):
            await add_turn(store, ALICE, a1.id, n)
        await add_turn(store, ALICE, a2.id, 0)
        await add_turn(store, BOB, b1.id, 0)
        await store.save_summary(ALICE, a1.id, 2, "v1")
        await store.save_summary(ALICE, a1.id, 3, "v2")
        await store.save_summary(BOB, b1.id, 1, "bob")

        assert await store.erase_user(ALICE) == {"conversations": 2, "turns": 4, "summaries": 2}
        assert await store.list(ALICE) == []
        for conversation in (a1, a2):
            with pytest.raises(NotFoundError):
                await store.get(ALICE, conversation.id)
        assert (await store.get(BOB, b1.id)).turn_count == 1
        assert (await store.summary(BOB, b1.id)).text == "bob"
        assert await store.erase_user(ALICE) == {"conversations": 0, "turns": 0, "summaries": 0}

    async def test_a_user_can_start_again_after_erasure(self, store):
        old = await store.create(ALICE)
        await add_turn(store, ALICE, old.id, 0)
        await store.erase_user(ALICE)
        new = await store.create(ALICE)
        assert (await add_turn(store, ALICE, new.id, 0)).index == 0
        assert [c.id for c in await store.list(ALICE)] == [new.id]

    # --- delete_inactive (the history TTL) -------------------------------------------------------------------

    async def test_delete_inactive_uses_last_activity(self, store):
        old = await store.create(ALICE, "old")
        await add_turn(store, ALICE, old.id, 0)
        await store.save_summary(ALICE, old.id, 1, "s")
        recent = await store.create(BOB, "recent")
        refreshed = await store.create(ALICE, "refreshed")
        await add_turn(store, ALICE, refreshed.id, 0)  # activity after `recent` was created
        old_at = (await store.get(ALICE, old.id)).updated_at
        cutoff = recent.updated_at
        assert old_at < cutoff < (await store.get(ALICE, refreshed.id)).updated_at

        assert await store.delete_inactive(old_at) == {"conversations": 0, "turns": 0, "summaries": 0}  # strict <
        assert await store.delete_inactive(cutoff) == {"conversations": 1, "turns": 1, "summaries": 1}
        with pytest.raises(NotFoundError):
            await store.get(ALICE, old.id)
        assert [c.id for c in await store.list(ALICE)] == [refreshed.id]
        assert [c.id for c in await store.list(BOB)] == [recent.id]

    async def test_delete_inactive_spares_kept_conversations(self, store):
        busy = await store.create(ALICE)
        idle = await store.create(BOB)
        await add_turn(store, ALICE, busy.id, 0)
        await add_turn(store, BOB, idle.id, 0)
        future = time.time() + 3600
        counts = await store.delete_inactive(future, keep=[busy.id, "unknown-id"])
        assert counts == {"conversations": 1, "turns": 1, "summaries": 0}
        assert (await store.get(ALICE, busy.id)).turn_count == 1
        assert await store.list(BOB) == []
        assert await store.delete_inactive(future, keep={busy.id}) == {"conversations": 0, "turns": 0, "summaries": 0}
        assert await store.delete_inactive(future) == {"conversations": 1, "turns": 1, "summaries": 0}
        assert await store.list(ALICE) == []

    async def test_delete_inactive_on_an_empty_store(self, store):
        assert await store.delete_inactive(time.time() + 3600) == {"conversations": 0, "turns": 0, "summaries": 0}

    # --- feedback (votes on answers) --------------------------------------------------------------------------

    async def test_a_vote_is_read_back_with_its_turn(self, store):
        conversation = await store.create(ALICE)
        for n in range(2):
            await add_turn(store, ALICE, conversation.id, n)
        given = await store.rate(ALICE, conversation.id, 1, "down", "the ARM steps are missing")
        assert (given.user_id, given.vote, given.comment) == (ALICE, "down", "the ARM steps are missing")
        turns = await store.turns(ALICE, conversation.id)
        assert turns[0].feedback is None
        assert turns[1].feedback == given
        assert (await store.turns(ALICE, conversation.id, last=1))[0].feedback == given

    async def test_one_vote_per_answer_changed_in_place(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        first = await store.rate(ALICE, conversation.id, 0, "up")
        second = await store.rate(ALICE, conversation.id, 0, "down", "on reflection, wrong")
        assert second.created_at == first.created_at and second.updated_at >= first.updated_at
        [turn] = await store.turns(ALICE, conversation.id)
        assert (turn.feedback.vote, turn.feedback.comment) == ("down", "on reflection, wrong")
        assert await store.unrate(ALICE, conversation.id, 0) is True
        assert await store.unrate(ALICE, conversation.id, 0) is False
        assert (await store.turns(ALICE, conversation.id))[0].feedback is None

    async def test_voting_needs_an_owned_existing_turn(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        for user, conversation_id, index in (
            (BOB, conversation.id, 0),
            (ALICE, conversation.id, 1),
            (ALICE, conversation.id, -1),
            (ALICE, "missing", 0),
        ):
            with pytest.raises(TurnNotFoundError) as caught:
                await store.rate(user, conversation_id, index, "up")
            assert ALICE not in str(caught.value) or user == ALICE
            with pytest.raises(TurnNotFoundError):
                await store.unrate(user, conversation_id, index)
        assert (await store.turns(ALICE, conversation.id))[0].feedback is None

    async def test_a_vote_leaves_the_turn_and_activity_untouched(self, store):
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        before = await store.get(ALICE, conversation.id)
        [turn] = await store.turns(ALICE, conversation.id)
        await store.rate(ALICE, conversation.id, 0, "up", "thanks")
        assert await store.get(ALICE, conversation.id) == before
        [rated] = await store.turns(ALICE, conversation.id)
        assert rated.model_copy(update={"feedback": None}) == turn

    async def test_votes_go_with_deleted_and_erased_conversations(self, store):
        deleted = await store.create(ALICE)
        erased = await store.create(ALICE)
        kept = await store.create(BOB)
        for conversation, user in ((deleted, ALICE), (erased, ALICE), (kept, BOB)):
            await add_turn(store, user, conversation.id, 0)
            await store.rate(user, conversation.id, 0, "down", f"{user} says no")
        await store.delete(ALICE, deleted.id)
        await store.erase_user(ALICE)
        logged = await store.logged_turns(0, time.time() + 3600)
        assert [(t.user_id, t.turn.feedback.comment) for t in logged] == [(BOB, "bob says no")]
        again = await store.create(ALICE)  # a new conversation cannot inherit an old vote
        await add_turn(store, ALICE, again.id, 0)
        assert (await store.turns(ALICE, again.id))[0].feedback is None

    # --- the turn log (operators' reports) --------------------------------------------------------------------

    async def test_logged_turns_span_users_within_the_range(self, store):
        a = await store.create(ALICE)
        b = await store.create(BOB)
        first = await add_turn(store, ALICE, a.id, 0)
        second = await add_turn(store, BOB, b.id, 0)
        third = await add_turn(store, ALICE, a.id, 1)
        await store.rate(ALICE, a.id, 1, "up")
        everything = await store.logged_turns(first.created_at, third.created_at + 1)
        assert [(t.user_id, t.conversation_id, t.turn.index) for t in everything] == [
            (ALICE, a.id, 0),
            (BOB, b.id, 0),
            (ALICE, a.id, 1),
        ]
        assert everything[0].turn.question == first.question and everything[0].turn.trace == first.trace
        assert everything[2].turn.feedback.vote == "up"
        window = await store.logged_turns(second.created_at, third.created_at)  # until is exclusive
        assert [(t.user_id, t.turn.index) for t in window] == [(BOB, 0)]
        assert [t.turn.index for t in await store.logged_turns(0, third.created_at + 1, limit=1)] == [0]
        assert await store.logged_turns(third.created_at + 1, third.created_at + 2) == []
