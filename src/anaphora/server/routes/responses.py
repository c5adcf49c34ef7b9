"""OpenAI's Responses API over the conversation store: ``POST /v1/responses`` (JSON, or SSE with ``stream``),
``GET``/``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``.

The chains are the library's (:mod:`anaphora.store.chains`); this module maps OpenAI's shapes to them:

- ``previous_response_id``: the chain that response ends. Continuing from its latest turn appends to its
  conversation; continuing from an earlier one (a branch) stores a new conversation holding the chain up to it.
- ``conversation``: the server-held conversation; the turn is appended to it.
- neither: a new conversation holds the chain that starts here.
- ``store: false``: the chain's latest turns, sent to the engine as stateless history; nothing is stored or remembered.

Input items before the question are history too: with ``store`` they are stored as turns (user then assistant, as
a conversation holds them); without, they are simply the history after the chain's. Nothing is written before the
turn is admitted and answered: a new conversation, a branch's copy and the input items are stored with the turn, in
its transaction, so a refused, failed or killed turn leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from anaphora.errors import InputError
from anaphora.pipeline.engine import TurnRequest, turns_to_messages
from anaphora.server import completions, replies, responses
from anaphora.server.response_schemas import (
    CreateResponse,
    ItemList,
    ResponseDeleted,
    ResponseOut,
    messages_of,
    pairs_of,
)
from anaphora.server.routes.deps import Svc, User, VisitorTurn, check_length, memory_allowed
from anaphora.server.state import Service
from anaphora.server.turns import Turn
from anaphora.store import chains
from anaphora.store.protocols import StoredTurn
from anaphora.types import Message, TurnResult

router = APIRouter(tags=["responses"])
BASE = "/v1/responses"


def split_input(body: CreateResponse, max_chars: int) -> tuple[str, list[Message]]:
    """(question, the input's earlier messages): the last input item must be the user's question."""
    given = body.input
    messages = [Message(role="user", content=given)] if isinstance(given, str) else messages_of(given)
    for number, message in enumerate(messages):
        check_length(message.content, max_chars, f"input[{number}]" if len(messages) > 1 else "input")
    if messages[-1].role != "user":
        raise InputError(
            f"the last input item must be the user's question, not a {messages[-1].role} message",
            hint="end `input` with the user's message; earlier items are the history",
            param=f"input[{len(messages) - 1}].role",
            code="invalid_value",
        )
    return messages[-1].content, messages[:-1]


def echo(body: CreateResponse) -> dict[str, Any]:
    return {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": body.metadata or {},
        "temperature": body.temperature,
        "user": body.user,
    }


async def stateless_history(svc: Service, user_id: str, body: CreateResponse) -> list[Message]:
    """The latest turns a chain or a conversation holds (as many as a prompt shows), for a turn not stored."""
    store = svc.components.conversations
    last = svc.settings.prompt.history_turns
    if body.previous_response_id is not None:
        return turns_to_messages(await chains.chain(store, user_id, body.previous_response_id, last=last))
    if body.conversation_id is not None:
        return turns_to_messages(await store.turns(user_id, body.conversation_id, last=last))
    return []


@router.post(
    BASE,
    response_model=None,
    responses={200: {"model": ResponseOut}},
    summary="Answer the input, continuing a response chain or a conversation; JSON, or SSE with stream",
)
async def create_response(body: CreateResponse, user: VisitorTurn, svc: Svc) -> Any:
    body.unsupported()
    question, earlier = split_input(body, svc.settings.server.max_message_chars)
    options = {"temperature": body.temperature, "max_tokens": body.max_output_tokens}
    if not body.store:
        history = [*await stateless_history(svc, user.user_id, body), *earlier]
        request = TurnRequest(question, user_id=user.user_id, history=history, memory=False, **options)
        shape = responses.ResponseShape(
            id=responses.temporary_id("resp"),
            item=responses.temporary_id("msg"),
            model=body.model,
            previous_response_id=body.previous_response_id,
            conversation_id=body.conversation_id,
            store=False,
            echo=echo(body),
        )
        return await respond(svc, body, await svc.runner.start(request), shape)
    place = await chains.place_turn(
        svc.components.conversations,
        user.user_id,
        previous_response=body.previous_response_id,
        conversation_id=body.conversation_id,
        seeded=chains.answered_elsewhere(pairs_of(earlier, "input")),
    )
    request = TurnRequest(
        question,
        user_id=user.user_id,
        conversation_id=place.conversation_id,
        prelude=place.prelude,
        memory=memory_allowed(user, svc, body.anaphora.memory),
        **options,
    )
    # the index a stream announces: exact unless turns of one conversation race, and then the stored result, which
    # the final event and the JSON reply carry, has the last word
    shape = responses.ResponseShape.stored(place.conversation_id, place.index, body.model, echo=echo(body))
    return await respond(svc, body, await svc.runner.start(request), shape)


async def respond(svc: Service, body: CreateResponse, turn: Turn, shape: responses.ResponseShape) -> Any:
    """Finish the turn and answer with the response object, or stream it as Responses events."""
    count = svc.components.chat_model.count_tokens

    def extension(result: TurnResult) -> dict[str, Any]:
        return completions.turn_details(result, stored=body.store, support_url=svc.settings.server.support_url)

    if body.stream:
        return await completions.stream_turn(turn, responses.ResponseFraming(shape, count, extension))
    result = await turn.result()
    if body.store:
        shape = responses.ResponseShape.stored(result.conversation_id, result.turn_index, body.model, echo=shape.echo)
    spent = responses.usage(result.trace, result.answer, count)
    return replies.turn_reply(turn, shape.completed(result.answer, result.citations, spent, extension(result)))


def stored_object(svc: Service, conversation_id: str, turn: StoredTurn) -> dict[str, Any]:
    model = svc.components.chat_model
    shape = responses.ResponseShape.stored(conversation_id, turn.index, model.name)
    shape.created_at = int(turn.created_at)
    details = {
        "citations": turn.citations,
        "trace": turn.trace,
        "conversation_id": conversation_id,
        "turn_index": turn.index,
    }
    spent = responses.usage(turn.trace, turn.answer, model.count_tokens)
    return shape.completed(turn.answer, turn.citations, spent, details)


@router.get(
    f"{BASE}/{{response_id}}", response_model=None, responses={200: {"model": ResponseOut}}, summary="A stored response"
)
async def read_response(response_id: str, user: User, svc: Svc) -> replies.Reply:
    conversation_id, turn = await chains.response_turn(svc.components.conversations, user.user_id, response_id)
    return replies.Reply(stored_object(svc, conversation_id, turn))


@router.get(
    f"{BASE}/{{response_id}}/input_items",
    response_model=None,
    responses={200: {"model": ItemList}},
    summary="The input a stored response answered",
)
async def input_items(response_id: str, user: User, svc: Svc) -> dict[str, Any]:
    conversation_id, turn = await chains.response_turn(svc.components.conversations, user.user_id, response_id)
    return responses.item_list([responses.turn_items(conversation_id, turn)[0]])


@router.delete(
    f"{BASE}/{{response_id}}",
    response_model=None,
    responses={200: {"model": ResponseDeleted}},
    summary="Delete a stored response with the conversation that holds it",
)
async def delete_response(response_id: str, user: User, svc: Svc) -> dict[str, Any]:
    store = svc.components.conversations
    conversation = (await chains.find(store, user.user_id, response_id)).conversation
    async with svc.runner.conversation(user.user_id, conversation.id):  # after any turn in flight
        await store.delete(user.user_id, conversation.id)
    return {"id": response_id, "object": "response", "deleted": True}
