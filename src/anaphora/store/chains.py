"""Conversation chains: a response continues the chain that an earlier response ends.

Every stored turn is a response, named ``resp_{conversation}_{index}``, and the chain it ends is its conversation up
to it. Continuing from a conversation's latest turn appends to that conversation; continuing from an earlier one
branches: a new conversation holds the chain up to it, then the new turn, and the original keeps every turn.

Where a turn goes is decided before it runs (:func:`place_turn`) and written when it is stored, in one transaction
with what comes before it (:func:`write_turn`): the branch's copy and the turns answered elsewhere that the request
brought (OpenAI's input items). So a turn that is refused, fails or is killed leaves nothing behind, and no copy is
made for a turn that is never answered. :func:`branch`, :func:`append_answered` and :func:`discard_if_unanswered`
are the same steps for a caller that takes them one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.errors import NotFoundError
from anaphora.store.protocols import (
    ChainStart,
    Conversation,
    ConversationStore,
    NewTurn,
    StoredTurn,
    new_conversation_id,
)
from anaphora.turn_ids import parse_response_id
from anaphora.types import TurnTrace


def response_not_found(value: str) -> NotFoundError:
    """The same error for an id that is malformed, missing, not stored, or another user's."""
    return NotFoundError(
        f"no response {value!r}",
        hint="check the id: only stored responses are kept (not those of store: false or temporary chats), and "
        "only for their own user",
    )


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """Where a stored response is: its conversation (as read) and its turn's index."""

    conversation: Conversation
    index: int

    @property
    def is_latest(self) -> bool:
        return self.index == self.conversation.turn_count - 1


async def find(store: ConversationStore, user_id: str, response: str) -> ChainEnd:
    """The conversation and the turn a stored response's id names, read without the turns."""
    parsed = parse_response_id(response)
    if parsed is None:
        raise response_not_found(response)
    conversation_id, index = parsed
    try:
        conversation = await store.get(user_id, conversation_id)
    except NotFoundError:
        raise response_not_found(response) from None
    if index >= conversation.turn_count:
        raise response_not_found(response)
    return ChainEnd(conversation, index)


async def response_turn(store: ConversationStore, user_id: str, response: str) -> tuple[str, StoredTurn]:
    """(conversation id, the turn) of a stored response: one turn read."""
    end = await find(store, user_id, response)
    turns = await store.turns(user_id, end.conversation.id, start=end.index, stop=end.index + 1)
    if not turns:  # deleted meanwhile
        raise response_not_found(response)
    return end.conversation.id, turns[0]


async def chain(store: ConversationStore, user_id: str, response: str, *, last: int | None = None) -> list[StoredTurn]:
    """The turns of the chain a stored response ends, oldest first (with ``last``, only the latest ``last``)."""
    end = await find(store, user_id, response)
    turns = await store.turns(user_id, end.conversation.id, stop=end.index + 1, last=last)
    if not turns or turns[-1].index != end.index:  # deleted meanwhile
        raise response_not_found(response)
    return turns


async def branch(store: ConversationStore, user_id: str, response: str, *, title: str = "") -> Conversation:
    """A new conversation holding the chain a stored response ends (its turns copied in one transaction, with
    what their next turn reads); the original is left as it is. ``title``: none keeps the original's."""
    end = await find(store, user_id, response)
    branched = new_conversation_id()
    start = ChainStart(title=title, parent=end.conversation.id, upto=end.index + 1)
    await store.extend(user_id, branched, [], start=start)
    return await store.get(user_id, branched)


def added_trace(question: str) -> TurnTrace:
    """The trace of a turn that Anaphora did not answer (it was added as conversation items)."""
    return TurnTrace(question=question, retrieval_skipped=True, route_reason="added as items", answer_source="none")


def answered_elsewhere(pairs: Sequence[tuple[str, str]]) -> list[NewTurn]:
    """(question, answer) pairs answered elsewhere as turns, each with the trace that says so."""
    return [NewTurn(question=q, answer=a, trace=added_trace(q)) for q, a in pairs]


def _traced(turns: Sequence[NewTurn]) -> tuple[NewTurn, ...]:
    """The turns, each without a trace given the one that says it was added."""
    return tuple(t if t.trace is not None else t.model_copy(update={"trace": added_trace(t.question)}) for t in turns)


async def append_answered(
    store: ConversationStore,
    user_id: str,
    conversation_id: str,
    turns: Sequence[NewTurn],
    *,
    start: ChainStart | None = None,
) -> list[StoredTurn]:
    """Append turns answered elsewhere, all or none (a turn without a trace gets one saying it was added); with
    ``start`` they open a new conversation ``conversation_id``, in the same transaction."""
    return await store.extend(user_id, conversation_id, _traced(turns), start=start)


async def discard_if_unanswered(store: ConversationStore, user_id: str, conversation_id: str, index: int) -> bool:
    """Delete a conversation that does not hold turn ``index`` (one a caller created, e.g. with :func:`branch`, for
    a turn that then failed), so that a failed turn leaves nothing behind. Returns whether it was deleted. A caller
    holding a conversation's lock for its turns should hold it here too."""
    try:
        if (await store.get(user_id, conversation_id)).turn_count > index:
            return False
        await store.delete(user_id, conversation_id)
    except NotFoundError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Prelude:
    """What a turn's own write stores before the turn: the conversation it opens (``start``: a new chain or a
    branch; None: it exists) and the turns answered elsewhere that its request brought (``seeded``)."""

    start: ChainStart | None = None
    seeded: tuple[NewTurn, ...] = ()
    after: int | None = None  # the turn continues this turn of its conversation: a branch if others came since


@dataclass(frozen=True, slots=True)
class Before:
    """What comes before a turn, read when it runs: where it is stored (a branch, when turns of the conversation
    came after the response it continues), how many turns precede it, and the latest of them."""

    conversation_id: str
    prelude: Prelude | None
    turns_before: int
    recent: list[StoredTurn]


@dataclass(frozen=True, slots=True)
class Place:
    """Where a turn goes: its conversation (one that ``prelude.start`` opens has a fresh id), what its write stores
    first, and the index it will have unless turns of the conversation race (the stored turn has the last word)."""

    conversation_id: str
    prelude: Prelude
    index: int


async def place_turn(
    store: ConversationStore,
    user_id: str,
    *,
    previous_response: str | None = None,
    conversation_id: str | None = None,
    seeded: Sequence[NewTurn] = (),
) -> Place:
    """Where a turn that continues ``previous_response`` (appended when it is its chain's latest, else a branch),
    or goes on in ``conversation_id``, or starts a new chain (neither) is stored. Reads only; writes nothing."""
    seeded = _traced(seeded)
    if conversation_id is not None:  # unknown (or another user's): not found before any work
        held = (await store.get(user_id, conversation_id)).turn_count
        return Place(conversation_id, Prelude(seeded=seeded), held + len(seeded))
    if previous_response is None:
        return Place(new_conversation_id(), Prelude(ChainStart(), seeded), len(seeded))
    end = await find(store, user_id, previous_response)
    if end.is_latest:
        return Place(end.conversation.id, Prelude(seeded=seeded, after=end.index), end.index + 1 + len(seeded))
    start = ChainStart(parent=end.conversation.id, upto=end.index + 1)
    return Place(new_conversation_id(), Prelude(start, seeded), end.index + 1 + len(seeded))


async def history_before(
    store: ConversationStore, user_id: str, conversation_id: str, prelude: Prelude | None, *, last: int
) -> Before:
    """What comes before the turn once its prelude is written: the conversation's turns (a branch's parent's, up to
    the branch point), then the seeded ones; the latest ``last`` of them are read. A turn that continues a response
    after which other turns were stored meanwhile (requests that raced) becomes a branch from that response."""
    start = prelude.start if prelude is not None else None
    seeded = prelude.seeded if prelude is not None else ()
    if start is None:
        held = (await store.get(user_id, conversation_id)).turn_count
        after = prelude.after if prelude is not None else None
        if after is not None and held != after + 1:
            branch = Prelude(ChainStart(parent=conversation_id, upto=after + 1), seeded)
            return await history_before(store, user_id, new_conversation_id(), branch, last=last)
        earlier = await store.turns(user_id, conversation_id, last=last) if last > 0 else []
    elif start.parent is None:
        held, earlier = 0, []
    else:
        held = start.upto
        earlier = await store.turns(user_id, start.parent, stop=start.upto, last=last) if last > 0 else []
        if len(earlier) < min(last, held):  # the parent lost turns (deleted meanwhile)
            raise NotFoundError(f"no conversation {start.parent!r}", hint="the chain was deleted; start a new one")
    created = earlier[-1].created_at if earlier else 0.0
    added = [turn.stored(held + n, created) for n, turn in enumerate(seeded)]
    recent = [*earlier, *added][-last:] if last > 0 else []
    return Before(conversation_id, prelude, held + len(seeded), recent)


async def write_turn(
    store: ConversationStore, user_id: str, conversation_id: str, prelude: Prelude | None, turn: NewTurn
) -> StoredTurn:
    """Store a turn with its prelude, in one transaction; returns the turn as stored."""
    if prelude is None or (prelude.start is None and not prelude.seeded):
        return await store.append_turn(user_id, conversation_id, turn)
    stored = await store.extend(user_id, conversation_id, [*prelude.seeded, turn], start=prelude.start)
    return stored[-1]
