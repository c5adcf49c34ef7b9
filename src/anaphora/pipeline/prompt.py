"""Builds the generation prompt in the order that keeps provider and llama.cpp prefix caches warm:

system prompt -> verbatim recent turns -> <<<CONTEXT>>> excerpts with ids <<<END CONTEXT>>> -> the question, last.
Everything untrusted passes through :func:`anaphora.sanitize.sanitize` here, at the one place prompts are made.
"""

from __future__ import annotations

from collections.abc import Sequence

from anaphora.sanitize import sanitize
from anaphora.types import Message, Passage

CONTEXT_OPEN = "<<<CONTEXT>>>"
CONTEXT_CLOSE = "<<<END CONTEXT>>>"


def format_passage(passage: Passage) -> str:
    where = " — ".join(p for p in (passage.source, passage.heading) if p)
    label = f"[{sanitize(passage.id)}]" + (f" ({sanitize(where)})" if where else "")
    return f"{label}\n{sanitize(passage.text).strip()}"


def context_block(passages: Sequence[Passage]) -> str:
    body = "\n\n".join(format_passage(p) for p in passages) if passages else "(no excerpts found)"
    return f"{CONTEXT_OPEN}\n{body}\n{CONTEXT_CLOSE}"


def build_messages(
    system_prompt: str,
    history: Sequence[Message],
    passages: Sequence[Passage] | None,
    question: str,
) -> list[Message]:
    """``passages=None`` means retrieval was not used for this turn: no context block at all."""
    messages = [Message(role="system", content=system_prompt)]
    messages.extend(Message(role=m.role, content=sanitize(m.content)) for m in history if m.role != "system")
    final = sanitize(question).strip()
    if passages is not None:
        final = f"{context_block(passages)}\n\nQuestion: {final}"
    messages.append(Message(role="user", content=final))
    return messages
