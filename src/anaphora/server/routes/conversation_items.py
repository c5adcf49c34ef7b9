"""A conversation's items in the shape of OpenAI's Conversations resource: ``GET``/``POST
/v1/conversations/{id}/items``. Each stored turn is two items, the user's question and the assistant's answer
(with its citations as annotations); items added by POST are turns answered elsewhere, in pairs, stored all or none.
A page reads only its own turns, however long the conversation."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from anaphora.errors import InputError
from anaphora.server import responses
from anaphora.server.response_schemas import CreateItems, ItemList, NewConversation, messages_of, pairs_of
from anaphora.server.routes.deps import Svc, User, check_length
from anaphora.server.state import Service
from anaphora.store import chains
from anaphora.store.protocols import ChainStart, NewTurn, new_conversation_id

router = APIRouter(tags=["conversations"])
ITEMS = "/v1/conversations/{conversation_id}/items"


def page_positions(count: int, limit: int, order: str, after: int | None) -> tuple[list[int], bool]:
    """The positions of a page of ``count`` items (``after``: the position the previous page ended on), in
    ``order``, and whether more follow."""
    if order == "asc":
        first = 0 if after is None else after + 1
        return list(range(first, min(first + limit, count))), first + limit < count
    first = count - 1 if after is None else after - 1
    last = max(first - limit, -1)
    return list(range(first, last, -1)), last >= 0


@router.get(
    ITEMS,
    response_model=None,
    responses={200: {"model": ItemList}},
    summary="A conversation's items (each turn's question and answer), newest first by default",
)
async def list_items(
    conversation_id: str,
    user: User,
    svc: Svc,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: Annotated[str | None, Query(max_length=300)] = None,
) -> dict[str, Any]:
    store = svc.components.conversations
    count = 2 * (await store.get(user.user_id, conversation_id)).turn_count
    position = None if after is None else responses.parse_item_id(after, conversation_id)
    if after is not None and (position is None or position >= count):
        raise InputError(
            f"no item {after!r} in this conversation",
            hint="pass the last_id of the previous page",
            param="after",
            code="invalid_value",
        )
    positions, more = page_positions(count, limit, order, position)
    if not positions:
        return responses.item_list([], has_more=False)
    low, high = min(positions) // 2, max(positions) // 2 + 1
    turns = await store.turns(user.user_id, conversation_id, start=low, stop=high)
    by_position = {
        2 * turn.index + n: item for turn in turns for n, item in enumerate(responses.turn_items(conversation_id, turn))
    }
    return responses.item_list([by_position[p] for p in positions if p in by_position], has_more=more)


@router.post(
    ITEMS,
    response_model=None,
    responses={200: {"model": ItemList}},
    summary="Add turns answered elsewhere: user and assistant messages, in turn",
)
async def add_items(conversation_id: str, body: CreateItems, user: User, svc: Svc) -> dict[str, Any]:
    turns = conversation_turns(svc, body)
    async with svc.runner.conversation(user.user_id, conversation_id):  # after any turn in flight
        stored = await chains.append_answered(svc.components.conversations, user.user_id, conversation_id, turns)
    return responses.item_list([item for turn in stored for item in responses.turn_items(conversation_id, turn)])


def conversation_turns(svc: Service, body: CreateItems | NewConversation) -> list[NewTurn]:
    """``body.items`` (pairs of user and assistant messages) as turns answered elsewhere, checked."""
    messages = messages_of(body.items, "items")
    for number, message in enumerate(messages):
        check_length(message.content, svc.settings.server.max_message_chars, f"items[{number}]")
    if any(m.role == "system" for m in messages):
        raise InputError(
            "items: a conversation holds no system or developer messages (the service's system prompt applies)",
            hint="send user and assistant messages only",
            param="items",
            code="invalid_value",
        )
    return chains.answered_elsewhere(pairs_of(messages, "items"))


async def open_with_items(svc: Service, user_id: str, body: NewConversation) -> str:
    """A new conversation holding ``body.items``, created with them in one transaction; its id."""
    turns = conversation_turns(svc, body)
    conversation_id = new_conversation_id()
    start = ChainStart(title=body.title)
    await chains.append_answered(svc.components.conversations, user_id, conversation_id, turns, start=start)
    return conversation_id
