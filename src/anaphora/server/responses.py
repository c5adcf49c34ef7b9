"""OpenAI Responses API shapes: the response object, message items, annotations, usage, and the streamed events.

A stored response *is* a stored turn: its id names the conversation and the turn (``resp_{conversation}_{index}``),
and its items are the turn's question and answer (``msg_{conversation}_{2*index}`` and ``..._{2*index+1}``). So the
Responses API needs no store of its own: whatever holds the turn holds the response, is scoped to its user and is
deleted, swept or erased with it. A response that is not stored (``store: false``) gets a random id nothing finds.

Citations are ``file_citation`` annotations of the answer's text (``file_id``: the passage id, ``filename``: its
source, ``index``: where the answer cites it); the trace travels in the ``anaphora`` extension field, as on
``/v1/chat/completions``.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anaphora.server import errors, sse
from anaphora.server.completions import Counter, Extension, spent_tokens
from anaphora.store.protocols import StoredTurn
from anaphora.turn_ids import parse_response_id as parse_response_id  # the names of a turn live there
from anaphora.turn_ids import response_id
from anaphora.types import Citation, TurnResult, TurnTrace

_ITEM_ID = re.compile(r"msg_(.+)_(\d{1,10})")


def item_id(conversation_id: str, position: int) -> str:
    """The id of the item at ``position`` of a conversation: turn ``i`` is items ``2i`` (question), ``2i+1``."""
    return f"msg_{conversation_id}_{position}"


def parse_item_id(value: str, conversation_id: str) -> int | None:
    """The position of a conversation's item from its id; None for an id of no item of that conversation."""
    found = _ITEM_ID.fullmatch(value)
    return int(found.group(2)) if found and found.group(1) == conversation_id else None


def temporary_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def annotations(answer: str, citations: Sequence[Citation]) -> list[dict[str, Any]]:
    """Each citation as a ``file_citation`` at the place the answer cites it (its end, when it names no id), and,
    when its source is published (a base URL, a crawled site), a ``url_citation`` of the page at the heading over
    the same place (the span of ``[id]``)."""
    found = []
    for citation in citations:
        marker = f"[{citation.id}]"
        at = answer.find(marker)
        index = at if at >= 0 else len(answer)
        found.append(
            {
                "type": "file_citation",
                "file_id": citation.id,
                "filename": citation.source,
                "index": index,
                "title": citation.heading,
            }
        )
        if citation.url:
            end = index + len(marker) if at >= 0 else index
            title = citation.heading or citation.source
            found.append(
                {"type": "url_citation", "start_index": index, "end_index": end, "url": citation.url, "title": title}
            )
    return found


def usage(trace: TurnTrace | None, answer: str, count_tokens: Counter) -> dict[str, Any]:
    prompt_tokens, output, cached = spent_tokens(trace, answer, count_tokens)
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + output,
    }


def text_part(answer: str, citations: Sequence[Citation]) -> dict[str, Any]:
    return {"type": "output_text", "text": answer, "annotations": annotations(answer, citations), "logprobs": []}


def answer_item(item: str, answer: str, citations: Sequence[Citation], status: str = "completed") -> dict[str, Any]:
    content = [text_part(answer, citations)] if status == "completed" else []
    return {"id": item, "type": "message", "role": "assistant", "status": status, "content": content}


def question_item(item: str, question: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": question}]
    return {"id": item, "type": "message", "role": "user", "status": "completed", "content": content}


def turn_items(conversation_id: str, turn: StoredTurn) -> list[dict[str, Any]]:
    """A stored turn as the conversation's two items."""
    return [
        question_item(item_id(conversation_id, 2 * turn.index), turn.question),
        answer_item(item_id(conversation_id, 2 * turn.index + 1), turn.answer, turn.citations),
    ]


def item_list(items: list[dict[str, Any]], has_more: bool = False) -> dict[str, Any]:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


@dataclass
class ResponseShape:
    """What a response object says besides its answer: ids, the request's settings echoed, the extension."""

    id: str
    item: str
    model: str
    previous_response_id: str | None = None
    conversation_id: str | None = None
    store: bool = True
    created_at: int = field(default_factory=lambda: int(time.time()))
    echo: dict[str, Any] = field(default_factory=dict)  # instructions, max_output_tokens, metadata, ...

    @classmethod
    def stored(cls, conversation_id: str, index: int, model: str, **kwargs: Any) -> ResponseShape:
        """A response held as turn ``index`` of a conversation: the turn before it is its previous response."""
        return cls(
            id=response_id(conversation_id, index),
            item=item_id(conversation_id, 2 * index + 1),
            model=model,
            previous_response_id=response_id(conversation_id, index - 1) if index > 0 else None,
            conversation_id=conversation_id,
            **kwargs,
        )

    def object(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        extension: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        texts = [p["text"] for item in output for p in item.get("content", []) if p.get("type") == "output_text"]
        echo = {"instructions": None, "max_output_tokens": None, "metadata": {}, "temperature": None, "user": None}
        shaped = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": None,
            "model": self.model,
            "output": output,
            "output_text": "".join(texts),
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            "top_p": None,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "store": self.store,
            "previous_response_id": self.previous_response_id,
            "conversation": {"id": self.conversation_id} if self.conversation_id else None,
            "usage": usage,
            **echo,
            **self.echo,
        }
        if extension is not None:
            shaped["anaphora"] = extension
        return shaped

    def completed(self, answer: str, citations: Sequence[Citation], usage: dict, extension: dict) -> dict[str, Any]:
        return self.object("completed", [answer_item(self.item, answer, citations)], usage, extension)


class ResponseFraming:
    """The Responses API's event sequence for one streamed turn, numbered by ``sequence_number``:
    ``response.created``, ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
    ``response.output_text.delta``..., then ``response.output_text.done``, ``response.content_part.done``,
    ``response.output_item.done``, ``response.completed`` (with usage and the ``anaphora`` extension); an error
    after the stream started is ``response.failed`` then ``error``. No ``[DONE]``: the terminal event ends it."""

    def __init__(self, shape: ResponseShape, count_tokens: Counter, extension: Extension) -> None:
        self.shape = shape
        self.count_tokens = count_tokens
        self.extension = extension
        self.sequence = 0

    def _event(self, kind: str, **data: Any) -> str:
        event = sse.event({"type": kind, "sequence_number": self.sequence, **data}, name=kind)
        self.sequence += 1
        return event

    def _at(self) -> dict[str, Any]:
        return {"item_id": self.shape.item, "output_index": 0, "content_index": 0}

    def opening(self) -> list[str]:
        pending = self.shape.object("in_progress", [])
        return [
            self._event("response.created", response=pending),
            self._event("response.in_progress", response=pending),
            self._event(
                "response.output_item.added", output_index=0, item=answer_item(self.shape.item, "", [], "in_progress")
            ),
            self._event("response.content_part.added", **self._at(), part=text_part("", [])),
        ]

    def delta(self, text: str) -> str:
        return self._event("response.output_text.delta", **self._at(), delta=text, logprobs=[])

    def closing(self, result: TurnResult) -> list[str]:
        if result.conversation_id:  # the id the store gave the turn (the one announced, unless turns raced)
            stored = ResponseShape.stored(result.conversation_id, result.turn_index, self.shape.model)
            self.shape.id, self.shape.item = stored.id, stored.item
            self.shape.previous_response_id = stored.previous_response_id
        answer, citations = result.answer, result.citations
        spent = usage(result.trace, answer, self.count_tokens)
        return [
            self._event("response.output_text.done", **self._at(), text=answer, logprobs=[]),
            self._event("response.content_part.done", **self._at(), part=text_part(answer, citations)),
            self._event(
                "response.output_item.done", output_index=0, item=answer_item(self.shape.item, answer, citations)
            ),
            self._event(
                "response.completed",
                response=self.shape.completed(answer, citations, spent, self.extension(result)),
            ),
        ]

    def failure(self, exc: BaseException) -> list[str]:
        _, content, _ = errors.describe(exc)
        problem = content["error"]
        failed = self.shape.object("failed", [], error={"code": problem["code"], "message": problem["message"]})
        return [
            self._event("response.failed", response=failed),
            self._event("error", **{k: problem[k] for k in ("code", "message", "param", "hint")}),
        ]
