"""Writing memory after a turn: the episode, the facts the user stated, the entities named. No model by default.

An episode is the turn itself (the user's words and the answer), with relative dates resolved against the turn's
time. Its vector is of the turn *in its context* (the previous turn's text before it), so that "yes, the second
one" can still be found by what it was about; the item's text and provenance stay the turn's own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from anaphora.embeddings.base import Embedder
from anaphora.memory.dates import resolve_relative_dates
from anaphora.memory.extract import extract_entities, extract_facts
from anaphora.memory.protocols import MemoryWriter
from anaphora.memory.types import EntityMention, MemoryItem, new_memory_id
from anaphora.sanitize import sanitize


@dataclass(frozen=True, slots=True)
class TurnToRemember:
    """A stored turn, as the writer needs it. ``context`` is the previous turn's text (for the vector only)."""

    user_id: str
    conversation_id: str
    index: int
    question: str
    answer: str
    time: float
    context: str = ""


@dataclass(frozen=True, slots=True)
class Written:
    episodes: int
    facts: int
    entities: int

    @property
    def detail(self) -> str:
        return f"{self.episodes} episode, {self.facts} facts, {self.entities} entities"


def episode_text(question: str, answer: str) -> str:
    return f"{question}\n{answer}".strip()


class TurnRecorder:
    """Turns a stored turn into memory items and writes them; ``embedder`` ``None``: no vectors."""

    def __init__(self, store: MemoryWriter, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    def items(self, turn: TurnToRemember) -> tuple[list[MemoryItem], list[EntityMention]]:
        """What the turn teaches (pure CPU work, no I/O): the episode first, then the facts, and the entities."""
        question = resolve_relative_dates(sanitize(turn.question).strip(), turn.time)
        answer = resolve_relative_dates(sanitize(turn.answer).strip(), turn.time)
        common = {"user_id": turn.user_id, "conversation_id": turn.conversation_id, "turns": (turn.index,)}
        items = [
            MemoryItem(
                id=new_memory_id(),
                kind="episode",
                text=episode_text(question, answer),
                time=turn.time,
                source="turn",
                **common,
            )
        ]
        for fact in extract_facts(question):
            items.append(
                MemoryItem(
                    id=new_memory_id(),
                    kind="fact",
                    text=fact.text,
                    time=turn.time,
                    subject=fact.subject,
                    attribute=fact.attribute,
                    value=fact.value,
                    valid_from=turn.time,
                    source="rules",
                    **common,
                )
            )
        mentions = [EntityMention(name, kind, turn.time) for name, kind in extract_entities(question)]
        return items, mentions

    def vector_texts(self, turn: TurnToRemember, items: list[MemoryItem]) -> list[str]:
        """What each item's vector is made of: the episode in its context, a fact as stated."""
        context = sanitize(turn.context).strip()
        return [f"{context}\n{item.text}" if item.kind == "episode" and context else item.text for item in items]

    async def record(self, turn: TurnToRemember) -> Written:
        items, mentions = self.items(turn)
        vectors = None
        if self.embedder is not None:
            vectors = await asyncio.to_thread(self.embedder.embed, self.vector_texts(turn, items))
        stored = await self.store.add(turn.user_id, items, vectors)
        if mentions:
            await self.store.upsert_entities(turn.user_id, mentions)
        return Written(
            episodes=sum(i.kind == "episode" for i in stored),
            facts=sum(i.kind == "fact" for i in stored),
            entities=len(mentions),
        )
