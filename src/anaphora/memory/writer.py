"""Writing memory after a turn: the episode, the facts the user stated, the entities named, and the profile
rolled up from the current facts. No model by default.

An episode is what the user said in the turn, with relative dates resolved against the turn's time. The
assistant's answer is not kept: memory is evidence of what the user said, and documents stay the source of what
documents say (so a document deleted later lives on in no episode, and no earlier answer is quoted back as
memory). Its vector is of the turn *in its context* (the previous user turn before it), so that "yes, the second
one" can still be found by what it was about; the item's text and provenance stay the turn's own. That vector is
the sum of the two messages' vectors weighted by their token counts (what mean pooling over the two texts joined
would weigh them by), so that a turn whose messages retrieval has embedded already (the message is always one of
its queries) embeds nothing again: the writer reads those vectors from the embedding cache and embeds only the
texts it misses, uncached (bench/NOTES.md, issue 26: the joined text's embedding was most of a warm turn's CPU).

Every write carries the user's erase epoch from when the turn began: the store drops it if an erase came first.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anaphora.embeddings.base import Embedder, KnownVectors
from anaphora.memory.model_facts import ModelFactExtractor
from anaphora.memory.protocols import MemoryStore
from anaphora.memory.types import EntityMention, MemoryItem, new_memory_id
from anaphora.reading.dates import resolve_relative_dates
from anaphora.reading.extract import NO_LONGER, ExtractedFact, extract_entities
from anaphora.reading.message import read
from anaphora.sanitize import sanitize


@dataclass(frozen=True, slots=True)
class TurnToRemember:
    """A stored turn, as the writer needs it: the user's side only. ``context`` is the previous user turn's text
    (for the vector only)."""

    user_id: str
    conversation_id: str
    index: int
    question: str  # the user's words (what is remembered; the answer is not)
    time: float
    context: str = ""
    epoch: int | None = None  # the user's erase epoch when the turn began (None: unchecked)


@dataclass(frozen=True, slots=True)
class Written:
    episodes: int
    facts: int
    entities: int
    rejected: int = 0  # model facts the user's words did not support
    dropped: bool = False  # the user's memory was erased after the turn began: nothing written

    @property
    def detail(self) -> str:
        if self.dropped:
            return "dropped: the user's memory was erased after this turn began"
        rejected = f", {self.rejected} model facts rejected as unsupported" if self.rejected else ""
        return f"{self.episodes} episode, {self.facts} facts, {self.entities} entities{rejected}"


PROFILE_FACTS = 12  # current facts the profile lists, newest first


def profile_of(facts: list[MemoryItem]) -> tuple[str, list[str]]:
    """The profile rolled up from the user's current facts, newest first, and the conversations they came from:
    the same facts give the same text, so the prompt prefix that carries it stays cacheable until a fact changes."""
    current = [f for f in facts if f.current][:PROFILE_FACTS]
    return "; ".join(f.text for f in current), sorted({f.conversation_id for f in current})


_VERSION_IN = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+[a-z0-9-]*(?![\w.])|(?<![\w.])v\d+(?![\w.])", re.I)


def with_version(fact: ExtractedFact, current: list[MemoryItem]) -> ExtractedFact:
    """A new version of a thing the user has a current fact about, given that fact's key and the rest of its value:
    "I upgraded to 3.2" (a bare version) goes to the newest current fact with a version in it; "we upgraded Fluent
    Bit to 3.2" to the current fact of that key that names Fluent Bit. "on ARM64 nodes" in the old value stays.
    A value that goes on after its version ("Fluent Bit 3.2 on x86") is a restatement and stays as it is."""
    new = _VERSION_IN.search(fact.value)
    if new is None or fact.value[new.end() :].strip() or fact.value.startswith(NO_LONGER):
        return fact
    named = fact.value[: new.start()].split()
    for item in current:  # newest first
        old = _VERSION_IN.search(item.value)
        if item.kind != "fact" or not item.current or old is None or old.group(0) == new.group(0):
            continue
        if named and (item.attribute != fact.attribute or not all(w.lower() in item.value.lower() for w in named)):
            continue
        value = item.value[: old.start()] + new.group(0) + item.value[old.end() :]
        text = item.text.replace(old.group(0), new.group(0)) if old.group(0) in item.text else f"the user uses {value}"
        return ExtractedFact(item.subject, item.attribute, value, text)
    return fact


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


async def rebuild_profile(store: MemoryStore, user_id: str, *, epoch: int | None = None) -> None:
    """Roll the profile up again from the user's current facts (after a fact is written or forgotten)."""
    page = await store.list(user_id, kind="fact", limit=4 * PROFILE_FACTS)
    await store.set_profile(user_id, *profile_of(list(page.items)), epoch=epoch)


class TurnRecorder:
    """Turns a stored turn into memory items and writes them; ``embedder`` ``None``: no vectors; ``model_facts``:
    a capable chat model's facts besides the rules' (``None``: rules only); ``contextual``: an episode's vector is of
    the turn after the previous one (measured against the turn alone in bench/memory.py); ``known``: vectors
    computed already (the embedding cache, which retrieval fills with the turn's messages), reused and never
    written to."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None,
        model_facts: ModelFactExtractor | None = None,
        *,
        contextual: bool = True,
        known: KnownVectors | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.model_facts = model_facts
        self.contextual = contextual
        self.known = known

    def items(self, turn: TurnToRemember) -> tuple[list[MemoryItem], list[EntityMention]]:
        """What the turn teaches (pure CPU work, no I/O): the episode first, then the facts, and the entities."""
        question = resolve_relative_dates(sanitize(turn.question).strip(), turn.time)
        episode = MemoryItem(
            id=new_memory_id(),
            user_id=turn.user_id,
            kind="episode",
            text=question,
            conversation_id=turn.conversation_id,
            turns=(turn.index,),
            time=turn.time,
            source="turn",
        )
        items = [episode, *(fact_item(turn, fact, "rules") for fact in read(question).facts)]
        mentions = [EntityMention(name, kind, turn.time) for name, kind in extract_entities(question)]
        return items, mentions

    def context_of(self, turn: TurnToRemember) -> str:
        """The text an episode's vector is of besides its own: the previous user turn (none if not contextual)."""
        return sanitize(turn.context).strip() if self.contextual else ""

    def _embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Each text's vector: the known ones reused, the others embedded in one call (and not cached)."""
        assert self.embedder is not None
        found = self.known.known(texts) if self.known is not None else {}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, self.embedder.embed(missing), strict=True))
        return found

    def vectors(self, turn: TurnToRemember, items: list[MemoryItem]) -> np.ndarray:
        """Each item's vector: a fact's of its statement; the episode's of the turn in its context, the token-count
        weighted sum of the context's and the turn's vectors, normalised. Blocking."""
        assert self.embedder is not None
        context = self.context_of(turn)
        found = self._embed([item.text for item in items] + ([context] if context else []))
        rows = []
        for item in items:
            vector = np.asarray(found[item.text], dtype=np.float32)
            if item.kind == "episode" and context:
                weights = [max(1, self.embedder.count_tokens(t)) for t in (context, item.text)]
                vector = weights[0] * np.asarray(found[context], dtype=np.float32) + weights[1] * vector
                vector = vector / max(float(np.linalg.norm(vector)), 1e-9)
            rows.append(vector)
        return np.stack(rows).astype(np.float32, copy=False)

    async def _versions_placed(self, turn: TurnToRemember, items: list[MemoryItem]) -> list[MemoryItem]:
        """New versions given to the current fact they update (the store's current facts, newest first)."""
        bare = [i for i in items if i.kind == "fact" and _VERSION_IN.search(i.value)]
        if not bare:
            return items
        current = [f for f in (await self.store.list(turn.user_id, kind="fact", limit=50)).items if f.current]
        placed = {
            i.id: fact_item(
                turn, with_version(ExtractedFact(i.subject, i.attribute, i.value, i.text), current), i.source
            )
            for i in bare
        }
        return [placed.get(i.id, i) for i in items]

    async def record(self, turn: TurnToRemember) -> Written:
        items, mentions = self.items(turn)
        rejected = 0
        if self.model_facts is not None:
            found, rejected = await self.model_facts.extract(turn.question)
            known = {item.attribute for item in items if item.kind == "fact"}
            items += [fact_item(turn, fact, "model") for fact in found if fact.attribute not in known]
        items = await self._versions_placed(turn, items)
        vectors = None
        if self.embedder is not None:
            vectors = await asyncio.to_thread(self.vectors, turn, items)
        stored = await self.store.add(turn.user_id, items, vectors, epoch=turn.epoch)
        if not stored and turn.epoch is not None and await self.store.epoch(turn.user_id) != turn.epoch:
            return Written(0, 0, 0, rejected, dropped=True)
        if mentions:
            await self.store.upsert_entities(turn.user_id, mentions, epoch=turn.epoch)
        if any(item.kind == "fact" for item in stored):
            await rebuild_profile(self.store, turn.user_id, epoch=turn.epoch)
        return Written(
            episodes=sum(i.kind == "episode" for i in stored),
            facts=sum(i.kind == "fact" for i in stored),
            entities=len(mentions),
            rejected=rejected,
        )
