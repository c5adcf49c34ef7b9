"""A conversation's items in the shape of OpenAI's Conversations resource: ``GET``/``POST
/v1/conversations/{id}/items``. Each stored turn is two items, the user's question and the assistant's answer
(with its citations as annotations); items added by POST are turns answered elsewhere, in pairs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from anaphora.errors import InputError
from anaphora.server import responses
from anaphora.server.response_schemas import CreateItems, ItemList, NewConversation, messages_of, pairs_of
from anaphora.server.routes.deps import Svc, User, check_length
from anaphora.server.routes.responses import add_turns
from anaphora.server.state import Service
from anaphora.store.protocols import NewTurn

router = APIRouter(tags=["conversations"])
ITEMS = "/v1/conversations/{conversation_id}/items"


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
    turns = await svc.components.conversations.turns(user.user_id, conversation_id)
    items = [item for turn in turns for item in responses.turn_items(conversation_id, turn)]
    if order == "desc":
        items.reverse()
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InputError(
                f"no item {after!r} in this conversation",
                hint="pass the last_id of the previous page",
                param="after",
                code="invalid_value",
            )
        start = ids.index(after) + 1
    page = items[start : start + limit]
    return responses.item_list(page, has_more=start + limit < len(items))


@router.post(
    ITEMS,
    response_model=None,
    responses={200: {"model": ItemList}},
    summary="Add turns answered elsewhere: user and assistant messages, in turn",
)
async def add_items(conversation_id: str, body: CreateItems, user: User, svc: Svc) -> dict[str, Any]:
    turns = await add_conversation_items(svc, user.user_id, conversation_id, body)
    return responses.item_list(turns)


async def add_conversation_items(
    svc: Service, user_id: str, conversation_id: str, body: CreateItems | NewConversation
) -> list[dict[str, Any]]:
    """Append ``body.items`` (pairs of user and assistant messages) as turns; returns the items as stored."""
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
    pairs = pairs_of(messages, "items")
    store = svc.components.conversations
    await store.get(user_id, conversation_id)  # unknown (or another user's): 404
    first = await add_turns(svc, user_id, conversation_id, [NewTurn(question=q, answer=a) for q, a in pairs])
    stored = (await store.turns(user_id, conversation_id))[first : first + len(pairs)]
    return [item for turn in stored for item in responses.turn_items(conversation_id, turn)]
