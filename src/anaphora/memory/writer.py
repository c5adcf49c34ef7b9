"""Writing memory after a turn: the episode, the facts the user stated, the entities named, and the profile
rolled up from the current facts. No model by default.

An episode is the turn itself (the user's words and the answer), with relative dates resolved against the turn's
time. Its vector is of the turn *in its context* (the previous turn's text before it), so that "yes, the second
one" can still be found by what it was about; the item's text and provenance stay the turn's own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from anaphora.embeddings.base import Embedder
from anaphora.memory.dates import resolve_relative_dates
from anaphora.memory.extract import ExtractedFact, extract_entities, extract_facts
from anaphora.memory.model_facts import ModelFactExtractor
from anaphora.memory.protocols import MemoryStore
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
    rejected: int = 0  # model facts the user's words did not support

    @property
    def detail(self) -> str:
        rejected = f", {self.rejected} model facts rejected as unsupported" if self.rejected else ""
        return f"{self.episodes} episode, {self.facts} facts, {self.entities} entities{rejected}"


PROFILE_FACTS = 12  # current facts the profile lists, newest first


def profile_of(facts: list[MemoryItem]) -> tuple[str, list[str]]:
    """The profile rolled up from the user's current facts, newest first, and the conversations they came from:
    the same facts give the same text, so the prompt prefix that carries it stays cacheable until a fact changes."""
    current = [f for f in facts if f.current][:PROFILE_FACTS]
    return "; ".join(f.text for f in current), sorted({f.conversation_id for f in current})


def episode_text(question: str, answer: str) -> str:
    return f"{question}\n{answer}".strip()


def fact_item(turn: TurnToRemember, fact: ExtractedFact, source: str) -> MemoryItem:
    return MemoryItem(
        id=new_memory_id(),
        user_id=turn.user_id,
        kind="fact",
        text=fact.text,
        conversation_id=turn.conversation_id,
        turns=(turn.index,),
        time=turn.time,
        subject=fact.subject,
        attribute=fact.attribute,
        value=fact.value,
        valid_from=turn.time,
        source=source,
    )


class TurnRecorder:
    """Turns a stored turn into memory items and writes them; ``embedder`` ``None``: no vectors; ``model_facts``:
    a capable chat model's facts besides the rules' (``None``: rules only); ``contextual``: an episode's vector is of
    the turn after the previous one (measured against the turn alone in bench/memory.py)."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None,
        model_facts: ModelFactExtractor | None = None,
        *,
        contextual: bool = True,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.model_facts = model_facts
        self.contextual = contextual

    def items(self, turn: TurnToRemember) -> tuple[list[MemoryItem], list[EntityMention]]:
        """What the turn teaches (pure CPU work, no I/O): the episode first, then the facts, and the entities."""
        question = resolve_relative_dates(sanitize(turn.question).strip(), turn.time)
        answer = resolve_relative_dates(sanitize(turn.answer).strip(), turn.time)
        episode = MemoryItem(
            id=new_memory_id(),
            user_id=turn.user_id,
            kind="episode",
            text=episode_text(question, answer),
            conversation_id=turn.conversation_id,
            turns=(turn.index,),
            time=turn.time,
            source="turn",
        )
        items = [episode, *(fact_item(turn, fact, "rules") for fact in extract_facts(question))]
        mentions = [EntityMention(name, kind, turn.time) for name, kind in extract_entities(question)]
        return items, mentions

    def vector_texts(self, turn: TurnToRemember, items: list[MemoryItem]) -> list[str]:
        """What each item's vector is made of: the episode in its context, a fact as stated."""
        context = sanitize(turn.context).strip() if self.contextual else ""
        return [f"{context}\n{item.text}" if item.kind == "episode" and context else item.text for item in items]

    async def record(self, turn: TurnToRemember) -> Written:
        items, mentions = self.items(turn)
        rejected = 0
        if self.model_facts is not None:
            found, rejected = await self.model_facts.extract(turn.question)
            known = {item.attribute for item in items if item.kind == "fact"}
            items += [fact_item(turn, fact, "model") for fact in found if fact.attribute not in known]
        vectors = None
        if self.embedder is not None:
            vectors = await asyncio.to_thread(self.embedder.embed, self.vector_texts(turn, items))
        stored = await self.store.add(turn.user_id, items, vectors)
        if mentions:
            await self.store.upsert_entities(turn.user_id, mentions)
        if any(item.kind == "fact" for item in stored):
            page = await self.store.list(turn.user_id, kind="fact", limit=4 * PROFILE_FACTS)
            await self.store.set_profile(turn.user_id, *profile_of(list(page.items)))
        return Written(
            episodes=sum(i.kind == "episode" for i in stored),
            facts=sum(i.kind == "fact" for i in stored),
            entities=len(mentions),
            rejected=rejected,
        )
