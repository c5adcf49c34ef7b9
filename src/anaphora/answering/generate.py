"""Answer generation under the answer guard, streaming or not."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from anaphora.answering.answer_guard import RepetitionGuard
from anaphora.models.base import ChatModel, ChatOptions, ChatStream, Usage
from anaphora.types import Message

Relay = Callable[[str], None]  # takes each delta of the guarded answer (the answer stage drafts it to the sink)


@dataclass(frozen=True, slots=True)
class Generation:
    """An answer call's outcome: the guarded ``answer``, the ``guard`` that watched it, the call's ``usage`` and,
    when streamed, the milliseconds from the call to its first delta."""

    answer: str
    guard: RepetitionGuard
    usage: Usage
    first_token_ms: float | None = None


async def generate(model: ChatModel, messages: list[Message], options: ChatOptions, relay: Relay | None) -> Generation:
    """Generate under the repetition guard; with ``relay``, by streaming. Streaming holds back the sentence being
    written, so the relayed deltas always add up to the final answer, even when the guard cuts the model off."""
    guard = RepetitionGuard()
    if relay is None:
        reply = await model.chat(messages, options)
        cut = guard.check(reply.text, final=True)
        return Generation((reply.text if cut is None else cut).strip(), guard, reply.usage)
    started = time.perf_counter()
    stream = model.stream(messages, options)
    try:
        text, sent, first = await _relay(stream, guard, relay)
    finally:
        await stream.aclose()  # after a guard cut: stop the model now
    cut = guard.check(text, final=True)  # the last sentence, now complete
    if cut is not None and len(cut) >= sent:
        text = cut
    answer = text.rstrip()
    if len(answer) > sent:
        relay(answer[sent:])
    first_token_ms = None if first is None else (first - started) * 1000
    return Generation(answer, guard, stream.usage, first_token_ms)


async def _relay(stream: ChatStream, guard: RepetitionGuard, relay: Relay) -> tuple[str, int, float | None]:
    """Pass whole sentences of ``stream`` on to ``relay`` until it ends or the guard cuts it; returns the text so
    far, how much of it was sent and when the first delta came (``perf_counter``)."""
    text, sent, first = "", 0, None
    async for piece in stream:
        if first is None:
            first = time.perf_counter()
        text = (text + piece) if sent else (text + piece).lstrip()
        cut = guard.check(text)
        if cut is not None:
            text = cut
            break
        boundary = max(text.rfind(". "), text.rfind("\n"), text.rfind("? "), text.rfind("! "))
        if boundary + 1 > sent and text[boundary + 1 :].strip():  # never end a delta on trailing space
            relay(text[sent : boundary + 1])
            sent = boundary + 1
    return text, sent, first
