"""Server-held conversations: create, list, read, rename, append a turn (JSON or SSE), delete; all per user."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from anaphora.pipeline.engine import TurnRequest
from anaphora.report.signals import handoff
from anaphora.server import completions, replies
from anaphora.server.response_schemas import NewConversation
from anaphora.server.routes.conversation_items import open_with_items
from anaphora.server.routes.deps import Svc, User, VisitorTurn, check_length, memory_allowed
from anaphora.server.schemas import (
    Answer,
    ConversationDetail,
    ConversationList,
    ConversationOut,
    Deleted,
    PostMessage,
    RenameConversation,
    TurnOut,
)

router = APIRouter(tags=["conversations"])  # full paths, no prefix: the metrics label routes by their template
BASE = "/v1/conversations"


@router.post(BASE, status_code=201, response_model=ConversationOut, summary="Start a conversation")
async def create(user: User, svc: Svc, body: NewConversation | None = None) -> ConversationOut:
    body = body or NewConversation()
    store = svc.components.conversations
    if body.items:  # earlier turns, OpenAI's way of starting a conversation: stored with it, all or nothing
        conversation = await store.get(user.user_id, await open_with_items(svc, user.user_id, body))
    else:
        conversation = await store.create(user.user_id, body.title)
    return ConversationOut.of(conversation).model_copy(update={"metadata": body.metadata or {}})


@router.get(BASE, response_model=ConversationList, summary="Your conversations, most recently active first")
async def list_conversations(
    user: User,
    svc: Svc,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,  # SQLite integers are 64-bit; far past any list
) -> ConversationList:
    found = await svc.components.conversations.list(user.user_id, limit=limit + 1, offset=offset)
    return ConversationList(
        data=[ConversationOut.of(c) for c in found[:limit]], limit=limit, offset=offset, has_more=len(found) > limit
    )


@router.get(
    f"{BASE}/{{conversation_id}}",
    response_model=ConversationDetail,
    summary="A conversation with its latest turns (a page: earlier ones with before=the first index shown)",
)
async def read(
    conversation_id: str,
    user: User,
    svc: Svc,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
) -> ConversationDetail:
    store = svc.components.conversations
    conversation = await store.get(user.user_id, conversation_id)
    turns = await store.turns(user.user_id, conversation_id, stop=before, last=limit)
    link = svc.settings.server.support_url
    return ConversationDetail(
        **ConversationOut.of(conversation).model_dump(),
        turns=[TurnOut.of(t, support_url=link) for t in turns],
        has_more=bool(turns) and turns[0].index > 0,
    )


@router.patch(f"{BASE}/{{conversation_id}}", response_model=ConversationOut, summary="Rename a conversation")
async def rename(conversation_id: str, body: RenameConversation, user: User, svc: Svc) -> ConversationOut:
    return ConversationOut.of(await svc.components.conversations.rename(user.user_id, conversation_id, body.title))


@router.post(
    f"{BASE}/{{conversation_id}}/messages",
    response_model=Answer,
    summary="Ask the next question; the answer as JSON, or as SSE with stream: true",
)
async def post_message(conversation_id: str, body: PostMessage, user: VisitorTurn, svc: Svc) -> Any:
    check_length(body.content, svc.settings.server.max_message_chars, "content")
    memory = memory_allowed(user, svc, body.memory)
    request = TurnRequest(body.content, user_id=user.user_id, conversation_id=conversation_id, memory=memory)
    turn = await svc.runner.start(request)

    def extension(result):
        return completions.turn_details(result, stored=True, support_url=svc.settings.server.support_url)

    if body.stream:
        completion = completions.Completion(svc.components.chat_model.name, svc.components.chat_model.count_tokens)
        return await completions.streaming(turn, completion, extension)
    result = await turn.result()
    link = handoff(result.trace, svc.settings.server.support_url)
    return replies.turn_reply(turn, Answer(**dict(result), handoff=link))  # the result's models, not re-validated


@router.delete(
    f"{BASE}/{{conversation_id}}", response_model=Deleted, summary="Delete a conversation, its turns and summaries"
)
async def delete(conversation_id: str, user: User, svc: Svc) -> Deleted:
    async with svc.runner.conversation(user.user_id, conversation_id):  # after any turn in flight
        await svc.components.conversations.delete(user.user_id, conversation_id)
    return Deleted(id=conversation_id)
