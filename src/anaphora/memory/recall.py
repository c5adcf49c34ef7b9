"""Recall: rank one user's memory items for a question by hybrid lexical + dense scoring, with time awareness.

1. Both searches run over the user's items only (BM25 with the user's own statistics, and cosine of the question's
   vector), ``depth`` deep.
2. Pseudo-relevance feedback: the words of the best few items of that first fusion form a second lexical query,
   so a question that shares few words with the turn it needs still reaches it through its neighbours' words.
3. The lists are fused by their min-max normalised scores (CombSUM, weighted: the passage retriever's fusion,
   :func:`anaphora.retrieval.fusion.normalised_sum`), then adjusted:
   - a turn next to well-matching turns of its conversation gains a share of their scores, halved at two turns'
     distance (the answer to a question is often the next turn; the item stays one turn, so it costs one of the k);
   - every item gains a share of its conversation's strength (the mean of its best three fused scores): a session
     that matches in several turns is likelier to hold the answer than a turn that matches by luck;
   - names the question mentions (people, products) that an item mentions too raise it (damped: a name in most
     of the user's items raises little);
   - a fact that was superseded ranks below the current one, unless the question asks about the past;
   - a question about a span of time ("last year", "yesterday", "in 2022", "on 3 June, 2023", "in July", resolved
     against ``now``) raises the items said in it;
   - among equals, the more recent item wins.
4. Each recalled item says why it was recalled (which lists found it, at what rank, which boosts applied).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.memory.protocols import MemoryReader
from anaphora.memory.types import MemoryHit, MemoryItem
from anaphora.reading.dates import period_asked
from anaphora.reading.extract import extract_entities
from anaphora.reading.message import read
from anaphora.retrieval.fusion import normalised_sum
from anaphora.text import whole_word

FOUND = 0.01  # what being in a list at all adds to an item's normalised score


@dataclass(frozen=True, slots=True)
class Recalled:
    """An item recalled for a question, its fused score and the cosine similarity of item and question."""

    item: MemoryItem
    score: float
    similarity: float | None
    why: str


@dataclass(frozen=True, slots=True)
class RecallWeights:
    """How recall ranks (see the module docstring). Chosen on the LoCoMo dev conversations (bench/memory.py;
    docs/benchmarks.md), from a plateau rather than a peak: evidence recall@10 moves by about 0.01 around them
    (``window`` 2 to 3 and ``session_weight`` 0.3 to 0.5 all gave 0.761-0.766 against 0.757 for neither;
    bench/NOTES.md)."""

    depth: int = 100
    lexical_weight: float = 1.0
    dense_weight: float = 0.7
    feedback_items: int = 3
    feedback_weight: float = 0.5
    name_boost: float = 1.5
    neighbour_weight: float = 0.8
    superseded_penalty: float = 0.5
    recency_weight: float = 0.02
    period_boost: float = 0.5
    window: int = 2
    session_weight: float = 0.3
    session_top: int = 3


class MemoryRecall:
    """Ranks a user's items for a question (see the module docstring); ``embedder`` ``None``: lexical only."""

    def __init__(self, store: MemoryReader, embedder: Embedder | None, weights: RecallWeights | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.weights = weights or RecallWeights()

    async def _embed(self, text: str) -> np.ndarray | None:
        if self.embedder is None:
            return None
        return await asyncio.to_thread(self.embedder.embed, [text])

    async def rank(self, user_id: str, question: str, *, now: float | None = None) -> list[Recalled]:
        """The user's items for ``question``, best first, at most ``depth``; ``now`` (when the question is asked)
        resolves the relative dates it names (without it, only a year it names counts)."""
        vector = await self._embed(question)
        lexical_task = self.store.lexical(user_id, [question], self.weights.depth)
        if vector is not None:
            (lexical,), (dense,) = await asyncio.gather(
                lexical_task, self.store.dense(user_id, vector, self.weights.depth)
            )
        else:
            (lexical,), dense = await lexical_task, []
        lists: dict[str, tuple[float, list[MemoryHit]]] = {
            "lexical": (self.weights.lexical_weight, lexical),
            "dense": (self.weights.dense_weight, dense),
        }
        first = self._fuse(lists)[: self.weights.depth]
        items = await self.store.get_many(user_id, [item_id for item_id, _ in first])
        if self.weights.feedback_items and first:
            best = [items[i].text for i, _ in first[: self.weights.feedback_items] if i in items]
            (feedback,) = await self.store.lexical(user_id, [" ".join([question, *best])], self.weights.depth)
            lists["feedback"] = (self.weights.feedback_weight, feedback)
        fused = self._fuse(lists)[: self.weights.depth]
        missing = [item_id for item_id, _ in fused if item_id not in items]
        if missing:
            items.update(await self.store.get_many(user_id, missing))
        if self.weights.neighbour_weight:
            fused = self._smooth(fused, items)
        similarity = {h.item_id: h.score for h in dense}
        ranks = {name: {h.item_id: r for r, h in enumerate(hits, 1)} for name, (_, hits) in lists.items()}
        period = period_asked(question, now)
        return self._adjust(question, fused, items, similarity, ranks, period)

    @staticmethod
    def _fuse(lists: dict[str, tuple[float, list[MemoryHit]]]) -> list[tuple[str, float]]:
        """The passage retriever's CombSUM of min-max normalised lists (:mod:`anaphora.retrieval.fusion`); found
        at all counts a little."""
        rankings = [(weight, [(h.item_id, h.score) for h in hits]) for weight, hits in lists.values()]
        return normalised_sum(rankings, method="minmax", found_bonus=FOUND)

    def _smooth(self, fused: list[tuple[str, float]], items: dict[str, MemoryItem]) -> list[tuple[str, float]]:
        """A turn next to well-matching turns of the same conversation gains a share of their scores: the answer
        to a question is often said in the turn after it."""
        at: dict[tuple[str, int], float] = {}
        for item_id, score in fused:
            item = items.get(item_id)
            if item is not None and item.kind == "episode":
                for turn in item.turns:
                    at[(item.conversation_id, turn)] = max(at.get((item.conversation_id, turn), 0.0), score)
        smoothed = []
        for item_id, score in fused:
            item = items.get(item_id)
            if item is not None and item.kind == "episode":
                near = [at.get((item.conversation_id, t + d), 0.0) / abs(d) for t in item.turns for d in self._offsets]
                score += self.weights.neighbour_weight * sum(near) / 2
            smoothed.append((item_id, score))
        if self.weights.session_weight:
            smoothed = self._by_session(smoothed, fused, items)
        return sorted(smoothed, key=lambda pair: -pair[1])

    @property
    def _offsets(self) -> list[int]:
        return [d for d in range(-self.weights.window, self.weights.window + 1) if d]

    def _by_session(
        self, smoothed: list[tuple[str, float]], fused: list[tuple[str, float]], items: dict[str, MemoryItem]
    ) -> list[tuple[str, float]]:
        """Each item gains a share of its conversation's strength (the mean of its best ``session_top`` fused
        scores): a session that matches in several turns is likelier to hold the answer than one lucky turn."""
        scores: dict[str, list[float]] = {}
        for item_id, score in fused:
            if item_id in items:
                scores.setdefault(items[item_id].conversation_id, []).append(score)
        strength = {
            c: sum(sorted(v, reverse=True)[: self.weights.session_top]) / self.weights.session_top
            for c, v in scores.items()
        }
        return [
            (i, s + self.weights.session_weight * strength[items[i].conversation_id]) if i in items else (i, s)
            for i, s in smoothed
        ]

    def _adjust(
        self,
        question: str,
        fused: list[tuple[str, float]],
        items: dict[str, MemoryItem],
        similarity: dict[str, float],
        ranks: dict[str, dict[str, int]],
        period: tuple[float, float] | None = None,
    ) -> list[Recalled]:
        names = {name.casefold() for name, _ in extract_entities(question)}
        patterns = {n: whole_word(n) for n in names}
        texts = {item_id: item.text.casefold() for item_id, item in items.items()}
        mentioned = {item_id: [n for n, p in patterns.items() if p.search(t)] for item_id, t in texts.items()}
        # a name in most of the candidates distinguishes nothing: damp its boost by its share of them
        share = {n: sum(n in m for m in mentioned.values()) / max(len(texts), 1) for n in names}
        asks_past = read(question).about_past
        newest = max((i.time for i in items.values()), default=0.0)
        oldest = min((i.time for i in items.values()), default=0.0)
        recalled: list[Recalled] = []
        for item_id, score in fused:
            item = items.get(item_id)
            if item is None:  # removed between the search and the read
                continue
            reasons = [f"{name} #{r[item_id]}" for name, r in ranks.items() if item_id in r]
            named = mentioned[item_id]
            if named:
                score *= 1 + self.weights.name_boost * sum(1 - share[n] for n in named) / len(names)
                reasons.append("names " + ", ".join(sorted(named)))
            if item.kind == "fact":
                if item.current:
                    reasons.append("current fact")
                elif not asks_past:
                    score *= self.weights.superseded_penalty
                    reasons.append("superseded fact")
                else:
                    reasons.append("earlier fact (the question asks about the past)")
            if period is not None and period[0] <= item.time < period[1]:
                score *= 1 + self.weights.period_boost
                reasons.append("said in the time asked about")
            if newest > oldest:
                score *= 1 + self.weights.recency_weight * (item.time - oldest) / (newest - oldest)
            recalled.append(Recalled(item, score, similarity.get(item_id), "; ".join(reasons)))
        recalled.sort(key=lambda r: (-r.score, -r.item.time))
        return recalled
