"""Facts extracted by the chat model, when a capable one is configured, each kept only if the user's own words
support it.

Like the rewrite guard for queries: a model may invent, generalise or take the assistant's words for the user's.
A fact line is kept only when ``supports(claim, words)`` holds for the user's words of the source turn: the answer
check's rule (its content words there, every risky token, a version, a number, a path, there verbatim), which the
composition passes in (:func:`anaphora.app.fact_support`), so memory does not depend on how answers are checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from anaphora.models.base import ChatModel, ChatOptions
from anaphora.reading.extract import ExtractedFact
from anaphora.sanitize import sanitize
from anaphora.types import Message

FACT_INSTRUCTIONS = (
    "List the facts the user states about themselves, their work or their setup (tools, versions, platforms, "
    "preferences, people), one per line as 'attribute: value', using the user's own words. Write NONE if there "
    "are none. Do not answer the message."
)
_LINE = re.compile(r"^\s*(?:[-*\d.)]+\s*)?([^:\n]{2,40}):\s*(.{1,120})$")
MAX_FACTS = 5
Supports = Callable[[str, str], bool]  # (claim, the user's words) -> whether the words hold the claim


class ModelFactExtractor:
    """Asks ``model`` for the facts of the user's words; ``supports``: whether those words hold a fact line."""

    def __init__(self, model: ChatModel, *, supports: Supports, max_tokens: int = 128) -> None:
        self.model = model
        self.supports = supports
        self.max_tokens = max_tokens

    async def extract(self, user_words: str) -> tuple[list[ExtractedFact], int]:
        """The supported facts, and how many lines the model wrote that were not."""
        words = sanitize(user_words)
        reply = await self.model.chat(
            [Message(role="system", content=FACT_INSTRUCTIONS), Message(role="user", content=words)],
            ChatOptions(temperature=0.0, max_tokens=self.max_tokens),
        )
        kept: list[ExtractedFact] = []
        rejected = 0
        for line in sanitize(reply.text).splitlines():
            match = _LINE.match(line)
            if match is None:
                continue
            attribute, value = match.group(1).strip().lower(), match.group(2).strip().rstrip(".")
            if not self.supports(f"{attribute} {value}", words):
                rejected += 1
                continue
            kept.append(ExtractedFact("user", attribute, value, f"the user's {attribute}: {value}"))
            if len(kept) == MAX_FACTS:
                break
        return kept, rejected
