"""``POST /v1/chat/completions``: OpenAI-compatible and stateless.

The last message is the question and must come from the user; every earlier user and assistant message is the
history (system and developer messages are not used: the service's system prompt is). Nothing is stored.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from anaphora.errors import InputError
from anaphora.pipeline.engine import TurnRequest
from anaphora.server import completions, replies
from anaphora.server.routes.deps import Svc, VisitorTurn, check_length, memory_allowed
from anaphora.server.schemas import ChatCompletionRequest, ChatMessage
from anaphora.types import Message

router = APIRouter(tags=["chat"])


def split(messages: list[ChatMessage], max_chars: int) -> tuple[str, list[Message]]:
    """(question, history) from an OpenAI ``messages`` array."""
    for number, message in enumerate(messages):
        check_length(message.text, max_chars, f"messages[{number}]")
    if messages[-1].role != "user":
        raise InputError(
            f"the last message must come from the user, not the {messages[-1].role}",
            hint="end `messages` with the user's question; earlier messages are the history",
            param=f"messages[{len(messages) - 1}].role",
            code="invalid_value",
        )
    history = [Message(role=m.role, content=m.text) for m in messages[:-1] if m.role in ("user", "assistant")]
    return messages[-1].text, history


@router.post("/v1/chat/completions", summary="Answer the last user message, with the earlier ones as history")
async def chat_completions(body: ChatCompletionRequest, user: VisitorTurn, svc: Svc) -> Any:
    question, history = split(body.messages, svc.settings.server.max_message_chars)
    request = TurnRequest(
        question,
        user_id=user.user_id,
        history=history,
        temperature=body.temperature,
        max_tokens=body.max_tokens,
        memory=memory_allowed(user, svc, body.anaphora.memory),
    )
    turn = await svc.runner.start(request)
    completion = completions.Completion(body.model, svc.components.chat_model.count_tokens)

    def extension(result):
        return completions.turn_details(result, stored=False, support_url=svc.settings.server.support_url)

    if body.stream:
        return await completions.streaming(turn, completion, extension)
    result = await turn.result()
    return replies.turn_reply(turn, completion.message(result, extension(result)))
