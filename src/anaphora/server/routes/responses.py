"""OpenAI's Responses API over the conversation store: ``POST /v1/responses`` (JSON, or SSE with ``stream``),
``GET``/``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``.

Where a turn's history comes from, and where the turn goes:

- ``previous_response_id``: the chain that response ends. Every stored response is a turn of a conversation, so the
  chain is that conversation up to the response; continuing from its latest turn appends to it, continuing from an
  earlier one (a branch) copies the turns up to it into a new conversation first, so no chain loses a turn.
- ``conversation``: the server-held conversation; the turn is appended to it.
- neither: a new conversation holds the chain that starts here.
- ``store: false``: the same history, sent to the engine as stateless history; nothing is stored or remembered.

Input items before the question are history too: with ``store`` they are added to the conversation as turns (user
then assistant, as a conversation holds them); without, they are simply the history after the chain's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter

from anaphora.errors import AnaphoraError, InputError, NotFoundError
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
from anaphora.store.protocols import Conversation, ConversationStore, NewTurn, StoredTurn
from anaphora.types import Message, TurnResult, TurnTrace

router = APIRouter(tags=["responses"])
BASE = "/v1/responses"


def response_not_found(value: str) -> NotFoundError:
    """The same error for an id that is malformed, missing, not stored, or another user's."""
    return NotFoundError(
        f"no response {value!r}",
        hint="check the id: only responses created with store: true are kept, and only for their own user",
    )


async def find_response(store: ConversationStore, user_id: str, value: str) -> tuple[Conversation, int]:
    """The conversation holding a stored response, and the response's turn index, read without its turns."""
    parsed = responses.parse_response_id(value)
    if parsed is None:
        raise response_not_found(value)
    conversation_id, index = parsed
    try:
        conversation = await store.get(user_id, conversation_id)
    except NotFoundError:
        raise response_not_found(value) from None
    if index >= conversation.turn_count:
        raise response_not_found(value)
    return conversation, index


async def stored_response(store: ConversationStore, user_id: str, value: str) -> tuple[str, StoredTurn]:
    """(conversation id, the turn) of a stored response's id; only the turns from it on are read (all of them when
    turns were added since the conversation was read)."""
    conversation, index = await find_response(store, user_id, value)
    turns = await store.turns(user_id, conversation.id, last=conversation.turn_count - index)
    if turns and turns[0].index > index:
        turns = await store.turns(user_id, conversation.id)
    found = next((turn for turn in turns if turn.index == index), None)
    if found is None:  # deleted meanwhile
        raise response_not_found(value)
    return conversation.id, found


async def chain(store: ConversationStore, user_id: str, value: str) -> list[StoredTurn]:
    """The turns of the chain a stored response ends, oldest first."""
    conversation, index = await find_response(store, user_id, value)
    turns = (await store.turns(user_id, conversation.id))[: index + 1]
    if len(turns) <= index:  # deleted meanwhile
        raise response_not_found(value)
    return turns


async def add_turns(svc: Service, user_id: str, conversation_id: str, turns: Sequence[NewTurn]) -> int:
    """Append turns that were answered elsewhere (input items, a copied chain, with what its next turn reads),
    after any turn in flight; returns the index of the first."""
    store = svc.components.conversations
    first = -1
    async with svc.runner.conversation(user_id, conversation_id):
        for turn in turns:
            stored = await store.append_turn(
                user_id,
                conversation_id,
                turn.question,
                turn.answer,
                turn.citations,
                turn.trace or added_trace(turn.question),
                shown_passages=turn.shown_passages,
                window_start=turn.window_start,
            )
            first = stored.index if first < 0 else first
    return first


def added_trace(question: str) -> TurnTrace:
    """The trace of a turn that Anaphora did not answer (it was added as conversation items)."""
    return TurnTrace(question=question, retrieval_skipped=True, route_reason="added as items", answer_source="none")


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


async def target_conversation(svc: Service, user_id: str, body: CreateResponse) -> tuple[str, bool, int]:
    """The conversation a stored turn goes to, whether this request created it, and how many turns it holds."""
    store = svc.components.conversations
    if body.conversation_id is not None:  # unknown (or another user's): 404 before any work
        return body.conversation_id, False, (await store.get(user_id, body.conversation_id)).turn_count
    if body.previous_response_id is None:  # the store titles it with its first question
        return (await store.create(user_id)).id, True, 0
    conversation, index = await find_response(store, user_id, body.previous_response_id)
    if index == conversation.turn_count - 1:
        return conversation.id, False, conversation.turn_count
    branch = await store.create(user_id, conversation.title)
    turns = (await store.turns(user_id, conversation.id))[: index + 1]
    await add_turns(svc, user_id, branch.id, turns)
    return branch.id, True, len(turns)


async def stateless_history(svc: Service, user_id: str, body: CreateResponse) -> list[Message]:
    """The history a chain or a conversation holds, for a turn that is not stored."""
    store = svc.components.conversations
    if body.previous_response_id is not None:
        return turns_to_messages(await chain(store, user_id, body.previous_response_id))
    if body.conversation_id is not None:
        last = svc.settings.prompt.history_turns
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
    seeded = pairs_of(earlier, "input")  # refused before anything is created
    conversation_id, created, held = await target_conversation(svc, user.user_id, body)
    index = held + len(seeded)  # this turn's, once the input items are added
    try:
        if seeded:
            await add_turns(svc, user.user_id, conversation_id, [NewTurn(question=q, answer=a) for q, a in seeded])
        memory = memory_allowed(user, svc, body.anaphora.memory)
        request = TurnRequest(question, user_id=user.user_id, conversation_id=conversation_id, memory=memory, **options)
        # the index a stream announces: exact unless turns of one conversation race, and then the stored
        # result, which the final event and the JSON reply carry, has the last word
        shape = responses.ResponseShape.stored(conversation_id, index, body.model, echo=echo(body))
        return await respond(svc, body, await svc.runner.start(request), shape)
    except Exception:
        if created:
            await discard_unanswered(svc, user.user_id, conversation_id, index)
        raise


async def discard_unanswered(svc: Service, user_id: str, conversation_id: str, index: int) -> None:
    """Delete a conversation this request created for a turn that failed before it was stored (it holds nothing
    but copies and input items), so a failed request leaves nothing behind. The turn's error is the one reported."""
    store = svc.components.conversations
    with contextlib.suppress(AnaphoraError):
        async with svc.runner.conversation(user_id, conversation_id):
            if (await store.get(user_id, conversation_id)).turn_count <= index:  # the turn was not stored
                await store.delete(user_id, conversation_id)


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
    conversation_id, turn = await stored_response(svc.components.conversations, user.user_id, response_id)
    return replies.Reply(stored_object(svc, conversation_id, turn))


@router.get(
    f"{BASE}/{{response_id}}/input_items",
    response_model=None,
    responses={200: {"model": ItemList}},
    summary="The input a stored response answered",
)
async def input_items(response_id: str, user: User, svc: Svc) -> dict[str, Any]:
    conversation_id, turn = await stored_response(svc.components.conversations, user.user_id, response_id)
    return responses.item_list([responses.turn_items(conversation_id, turn)[0]])


@router.delete(
    f"{BASE}/{{response_id}}",
    response_model=None,
    responses={200: {"model": ResponseDeleted}},
    summary="Delete a stored response with the conversation that holds it",
)
async def delete_response(response_id: str, user: User, svc: Svc) -> dict[str, Any]:
    store = svc.components.conversations
    conversation, _ = await find_response(store, user.user_id, response_id)
    async with svc.runner.conversation(user.user_id, conversation.id):  # after any turn in flight
        await store.delete(user.user_id, conversation.id)
    return {"id": response_id, "object": "response", "deleted": True}
