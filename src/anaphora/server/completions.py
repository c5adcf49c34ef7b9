"""OpenAI chat-completion shapes, and a started turn as an SSE stream: the streaming machinery (errors before the
first piece keep their HTTP status, the turn outlives the client) with the ``chat.completion.chunk`` framing; the
Responses API (:mod:`anaphora.server.responses`) brings its own framing to the same machinery.

The answer text travels in ``choices[0].message.content`` (or the chunks' ``delta.content``) and nothing else does:
citations, the trace (which holds the retrieval query) and turn details travel in the ``anaphora`` extension field.

Stream: a chunk with ``delta.role``, chunks with ``delta.content``, a chunk with ``finish_reason: "stop"``, then
one chunk with ``choices: []``, ``usage`` and ``anaphora`` (like OpenAI's usage chunk), then ``data: [DONE]``. An
error after the stream started is sent as ``data: {"error": {...}}`` followed by ``data: [DONE]``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi.responses import StreamingResponse

from anaphora.report.signals import handoff
from anaphora.server import errors, sse
from anaphora.server.turns import Turn
from anaphora.types import TurnResult, TurnTrace

Extension = Callable[[TurnResult], dict[str, Any]]
Counter = Callable[[str], int]


def spent_tokens(trace: TurnTrace | None, answer: str, count_tokens: Counter) -> tuple[int, int, int]:
    """``(prompt, completion, cached)`` tokens of a turn's answer: as the model's server reported them for the
    answer call, else the prompt as the budget counted it and the answer counted with the model's tokenizer (a
    quoted answer made no call; a server may report nothing)."""
    call = next((c for c in reversed(trace.calls) if c.purpose == "answer"), None) if trace else None
    prompt = call.prompt_tokens if call and call.prompt_tokens else (trace.prompt_tokens if trace else 0)
    completion = call.completion_tokens if call and call.completion_tokens else count_tokens(answer) if answer else 0
    return prompt, completion, call.cached_tokens if call else 0


def turn_details(result: TurnResult, *, stored: bool, support_url: str = "") -> dict[str, Any]:
    """The ``anaphora`` extension field; its models are encoded with the rest of the body (replies.encode).
    ``handoff``: the operator's support link, with a refused or weakly supported answer (null otherwise)."""
    details: dict[str, Any] = {
        "citations": list(result.citations),
        "trace": result.trace,
        "handoff": handoff(result.trace, support_url),
    }
    if stored:
        details["conversation_id"] = result.conversation_id
        details["turn_index"] = result.turn_index
    return details


class Completion:
    """Ids and shapes of one chat completion."""

    def __init__(self, model: str, count_tokens: Counter) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.count_tokens = count_tokens

    def usage(self, result: TurnResult) -> dict[str, int]:
        prompt, completion, _ = spent_tokens(result.trace, result.answer, self.count_tokens)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def message(self, result: TurnResult, extension: dict[str, Any]) -> dict[str, Any]:
        return {
            **self._base("chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.answer},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": self.usage(result),
            "anaphora": extension,
        }

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**self._base("chat.completion.chunk"), "choices": [choice]}

    def closing(self, result: TurnResult, extension: dict[str, Any]) -> dict[str, Any]:
        return {
            **self._base("chat.completion.chunk"),
            "choices": [],
            "usage": self.usage(result),
            "anaphora": extension,
        }


async def first_delta(turn: Turn) -> str | None:
    """Wait for the first piece of the answer, so that errors before it (unknown conversation, empty question,
    model down) still get their own HTTP status instead of a 200 stream that carries an error."""
    try:
        return await anext(turn.deltas)
    except StopAsyncIteration:
        await turn.result()  # a turn that ended without text: raise its error, if any
        return None


class Framing(Protocol):
    """How one API frames a streamed turn as SSE events: what goes before the text, each piece of it, what follows
    the stored result, and what an error after the 200 becomes."""

    def opening(self) -> list[str]: ...

    def delta(self, text: str) -> str: ...

    def closing(self, result: TurnResult) -> list[str]: ...

    def failure(self, exc: BaseException) -> list[str]: ...


class ChatFraming:
    """``chat.completion.chunk`` events, then ``[DONE]``."""

    def __init__(self, completion: Completion, extension: Extension) -> None:
        self.completion = completion
        self.extension = extension

    def opening(self) -> list[str]:
        return [sse.event(self.completion.chunk({"role": "assistant", "content": ""}))]

    def delta(self, text: str) -> str:
        return sse.event(self.completion.chunk({"content": text}))

    def closing(self, result: TurnResult) -> list[str]:
        closing = self.completion.closing(result, self.extension(result))
        return [sse.event(self.completion.chunk({}, finish_reason="stop")), sse.event(closing), sse.DONE]

    def failure(self, exc: BaseException) -> list[str]:
        _, content, _ = errors.describe(exc)
        return [sse.event(content), sse.DONE]


async def _events(turn: Turn, first: str | None, framing: Framing) -> AsyncIterator[str]:
    for event in framing.opening():
        yield event
    try:
        if first is not None:
            yield framing.delta(first)
            async for delta in turn.deltas:
                yield framing.delta(delta)
        result = await turn.result()
    except Exception as exc:  # after the 200 went out, an error can only travel as an event
        for event in framing.failure(exc):
            yield event
        return
    for event in framing.closing(result):
        yield event


async def stream_turn(turn: Turn, framing: Framing) -> StreamingResponse:
    """The turn as an SSE stream framed by ``framing``. The turn is stored even if the client goes away: it runs in
    its own task, which a disconnect (cancelling this response) does not cancel."""
    first = await first_delta(turn)
    return sse.response(_events(turn, first, framing))


async def streaming(turn: Turn, completion: Completion, extension: Extension) -> StreamingResponse:
    """The turn as a stream of chat-completion chunks."""
    return await stream_turn(turn, ChatFraming(completion, extension))
