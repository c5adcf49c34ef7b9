"""Second stage: rerank the first-stage candidates, drop the weak ones, keep the best few.

Scores are normalised so thresholds mean something: the first stage's similarity is the dense cosine similarity of
query and passage; rerankers return [0, 1]. A reranker failure keeps the first-stage order (the select stage falls
back to :meth:`PassageSelector.first_stage`; fail open, counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.rerank.base import Reranker
from anaphora.types import Passage, StageStatus


@dataclass(frozen=True, slots=True)
class Selection:
    passages: list[Passage]  # every survivor, best first
    status: StageStatus
    detail: str


class PassageSelector:
    def __init__(
        self,
        reranker: Reranker,
        *,
        similarity_threshold: float = 0.30,
        rerank_threshold: float = 0.30,
        timeout_s: float = 10.0,
    ) -> None:
        """``timeout_s``: the select stage's time budget (a reranker that takes longer is abandoned)."""
        self.reranker = reranker
        self.similarity_threshold = similarity_threshold
        self.rerank_threshold = rerank_threshold
        self.timeout_s = timeout_s

    def _similar_enough(self, passage: Passage) -> bool:
        # without a dense score (BM25-only retrieval) the similarity threshold cannot apply
        return passage.dense_score is None or passage.dense_score >= self.similarity_threshold

    def first_stage(self, candidates: Sequence[Passage]) -> Selection:
        """The candidates above the similarity threshold, in first-stage order: no reranking."""
        kept = [p for p in candidates if self._similar_enough(p)]
        dropped = len(candidates) - len(kept)
        note = f"{dropped} below similarity {self.similarity_threshold:g}" if dropped else ""
        return Selection(kept, "skipped", note or "first-stage order")

    async def run(self, query: str, candidates: Sequence[Passage]) -> Selection:
        """Raises when the reranker fails (the caller keeps :meth:`first_stage`)."""
        first = self.first_stage(candidates)
        kept = first.passages
        if not kept:
            return first
        scores = await self.reranker.score(query, [p.text for p in kept])
        if scores is None:  # the reranker has no opinion
            return first
        if len(scores) != len(kept):
            raise ValueError(f"{len(scores)} scores for {len(kept)} passages")
        ranked = sorted(
            (p.model_copy(update={"rerank_score": s}) for p, s in zip(kept, scores, strict=True)),
            key=lambda p: -(p.rerank_score or 0.0),
        )
        survivors = [p for p in ranked if (p.rerank_score or 0.0) >= self.rerank_threshold]
        below = len(ranked) - len(survivors)
        note = first.detail if first.detail != "first-stage order" else ""
        detail = "; ".join(x for x in (note, f"{below} below rerank {self.rerank_threshold:g}" if below else "") if x)
        return Selection(survivors, "ok", detail or f"reranked by {self.reranker.name}")
