"""Second stage: rerank the first-stage candidates, drop the weak ones, keep the best few.

Scores are normalised so thresholds mean something: the first stage's similarity is the dense cosine similarity of
query and passage; rerankers return [0, 1]. A reranker failure keeps the first-stage order (fail open, counted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.metrics import Metrics
from anaphora.rerank.base import NoModelReranker, Reranker
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
        metrics: Metrics | None = None,
    ) -> None:
        self.reranker = reranker
        self.similarity_threshold = similarity_threshold
        self.rerank_threshold = rerank_threshold
        self.timeout_s = timeout_s
        self.metrics = metrics

    def _similar_enough(self, passage: Passage) -> bool:
        # without a dense score (BM25-only retrieval) the similarity threshold cannot apply
        return passage.dense_score is None or passage.dense_score >= self.similarity_threshold

    async def run(self, query: str, candidates: Sequence[Passage]) -> Selection:
        kept = [p for p in candidates if self._similar_enough(p)]
        dropped = len(candidates) - len(kept)
        note = f"{dropped} below similarity {self.similarity_threshold:g}" if dropped else ""
        if isinstance(self.reranker, NoModelReranker) or not kept:
            return Selection(kept, "skipped", note or "first-stage order")
        try:
            scores = await asyncio.wait_for(self.reranker.score(query, [p.text for p in kept]), self.timeout_s)
            if len(scores) != len(kept):
                raise ValueError(f"{len(scores)} scores for {len(kept)} passages")
        except TimeoutError:
            return self._count(Selection(kept, "timeout", f"reranker took over {self.timeout_s:g}s; first-stage order"))
        except Exception as exc:  # fail open: keep the first-stage order
            return self._count(Selection(kept, "error", f"{type(exc).__name__}: {exc}; first-stage order"))
        ranked = sorted(
            (p.model_copy(update={"rerank_score": s}) for p, s in zip(kept, scores, strict=True)),
            key=lambda p: -(p.rerank_score or 0.0),
        )
        survivors = [p for p in ranked if (p.rerank_score or 0.0) >= self.rerank_threshold]
        below = len(ranked) - len(survivors)
        detail = "; ".join(x for x in (note, f"{below} below rerank {self.rerank_threshold:g}" if below else "") if x)
        return self._count(Selection(survivors, "ok", detail or f"reranked by {self.reranker.name}"))

    def _count(self, selection: Selection) -> Selection:
        if self.metrics:
            self.metrics.reranker.labels(status=selection.status).inc()
        return selection
