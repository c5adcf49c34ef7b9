"""The hybrid first stage: BM25 and dense lists fused with weighted reciprocal rank fusion."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.embeddings.batching import BatchingEmbedder
from anaphora.retrieval.fusion import weighted_rrf
from anaphora.retrieval.indexes import IndexCache
from anaphora.settings import Settings
from anaphora.store.corpus import SQLiteCorpus
from anaphora.types import Passage

LIST_DEPTH = 50  # each list contributes this many candidates to the fusion


class HybridRetriever:
    def __init__(self, corpus: SQLiteCorpus, indexes: IndexCache, embedder: Embedder, settings: Settings) -> None:
        self.corpus = corpus
        self.indexes = indexes
        self.embedder = embedder
        self.settings = settings

    @property
    def embedder(self) -> Embedder:
        return self._query_embedder.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        self._query_embedder = BatchingEmbedder(embedder)  # concurrent turns share model batches

    def warm_up(self) -> None:
        self.indexes.get()

    async def run(self, query: str, *, limit: int | None = None) -> list[Passage]:
        """Up to ``limit`` (default: the ``candidates`` setting) passages, best first, with their scores."""
        if not query.strip():
            return []
        return (await self._search_all([query], limit or self.settings.candidates))[0]

    async def _search_all(self, queries: list[str], limit: int) -> list[list[Passage]]:
        """One ranking per query; the queries are embedded together in one batch."""
        indexes = await asyncio.to_thread(self.indexes.get)
        vectors: list[np.ndarray | None] = [None] * len(queries)
        if self.settings.fusion in ("rrf", "dense"):
            vectors = list(np.asarray(await self._query_embedder.embed(queries)))
        return [self._search(indexes, q, v, limit) for q, v in zip(queries, vectors, strict=True)]

    def _search(self, indexes, query: str, vector: np.ndarray | None, limit: int) -> list[Passage]:
        fusion = self.settings.fusion
        depth = max(LIST_DEPTH, limit)
        lexical = indexes.bm25.search(query, depth) if fusion in ("rrf", "bm25") else []
        dense = indexes.dense.search(vector, depth) if vector is not None else []
        if fusion == "bm25":
            ranked = lexical
        elif fusion == "dense":
            ranked = dense
        else:
            ranked = weighted_rrf(
                [(self.settings.bm25_weight, lexical), (self.settings.dense_weight, dense)],
                k=self.settings.rrf_k,
            )
        ranked = ranked[:limit]
        lexical_scores, dense_scores = dict(lexical), dict(dense)
        if vector is not None:  # every candidate gets its cosine similarity, the score thresholds apply to
            missing = [key for key, _ in ranked if key not in dense_scores]
            dense_scores.update(indexes.dense.similarity(vector, missing))
        chunks = self.corpus.chunks([key for key, _ in ranked])
        return [
            Passage(
                id=chunks[key].id,
                text=chunks[key].text,
                source=chunks[key].source,
                heading=chunks[key].heading,
                score=score,
                bm25_score=lexical_scores.get(key),
                dense_score=dense_scores.get(key),
            )
            for key, score in ranked
            if key in chunks
        ]

    async def run_many(self, queries: Sequence[str], *, limit: int | None = None) -> list[Passage]:
        """Several phrasings of one need (e.g. a history-expanded query, then the bare message): each is retrieved
        and the rankings are fused by reciprocal rank fusion, the first query at weight 1 and the others at
        ``alternate_query_weight``."""
        limit = limit or self.settings.candidates
        queries = list(dict.fromkeys(q for q in queries if q.strip()))
        if len(queries) <= 1:
            return await self.run(queries[0] if queries else "", limit=limit)
        rankings = await self._search_all(queries, max(LIST_DEPTH, limit))
        by_id = {p.id: p for ranking in reversed(rankings) for p in ranking}
        index = {pid: n for n, pid in enumerate(by_id)}
        weights = [1.0] + [self.settings.alternate_query_weight] * (len(rankings) - 1)
        fused = weighted_rrf(
            [(w, [(index[p.id], p.score) for p in ranking]) for w, ranking in zip(weights, rankings, strict=True)],
            k=self.settings.rrf_k,
        )
        ids = list(by_id)
        return [by_id[ids[key]].model_copy(update={"score": score}) for key, score in fused[:limit]]
