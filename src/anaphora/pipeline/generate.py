"""Answer generation under the answer guard, streaming or not."""

from __future__ import annotations

import asyncio

from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.answer_guard import RepetitionGuard
from anaphora.types import Message

Deltas = asyncio.Queue[str | None]


def emit(deltas: Deltas | None, text: str | None) -> None:
    """Push a delta (``None`` ends the stream) to a streaming caller, if there is one."""
    if deltas is not None:
        deltas.put_nowait(text)


async def generate(
    model: ChatModel, messages: list[Message], options: ChatOptions, deltas: Deltas | None
) -> tuple[str, RepetitionGuard]:
    """Generate under the repetition guard. Streaming holds back the sentence being written, so the deltas always
    add up to the final answer, even when the guard cuts the model off."""
    guard = RepetitionGuard()
    if deltas is None:
        text = (await model.chat(messages, options)).text
        cut = guard.check(text, final=True)
        return (text if cut is None else cut).strip(), guard
    text, sent = "", 0
    async for piece in model.stream(messages, options):
        text = (text + piece) if sent else (text + piece).lstrip()
        cut = guard.check(text)
        if cut is not None:
            text = cut
            break
        boundary = max(text.rfind(". "), text.rfind("\n"), text.rfind("? "), text.rfind("! "))
        if boundary + 1 > sent and text[boundary + 1 :].strip():  # never end a delta on trailing space
            emit(deltas, text[sent : boundary + 1])
            sent = boundary + 1
    cut = guard.check(text, final=True)  # the last sentence, now complete
    if cut is not None and len(cut) >= sent:
        text = cut
    answer = text.rstrip()
    if len(answer) > sent:
        emit(deltas, answer[sent:])
    return answer, guard
