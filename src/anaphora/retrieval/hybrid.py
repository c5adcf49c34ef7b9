"""The hybrid first stage: lexical and dense lists from a passage index, fused with weighted reciprocal rank fusion.

The index is a :class:`~anaphora.store.protocols.PassageIndex`: the embedded one (BM25 + exact/HNSW over SQLite)
or PostgreSQL (full-text search + pgvector). Fusion happens here, the same for both, so switching backends changes
only the two lists. A turn's queries are embedded in one batch and searched in one worker-thread call, so blocking
database I/O never stalls the event loop and a database backend can answer all the queries in one round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.embeddings.batching import BatchingEmbedder
from anaphora.retrieval.base import Fused
from anaphora.retrieval.fusion import normalised_sum, weighted_rrf
from anaphora.retrieval.query_fusion import head_margin, keep_in_head, query_weights
from anaphora.settings import RetrievalSettings
from anaphora.store.protocols import PassageIndex, Ranking
from anaphora.types import Passage

LIST_DEPTH = 50  # each list contributes this many candidates to the fusion


class HybridRetriever:
    def __init__(self, index: PassageIndex, embedder: Embedder, settings: RetrievalSettings) -> None:
        self.index = index
        self.embedder = embedder
        self.settings = settings

    @property
    def embedder(self) -> Embedder:
        return self._query_embedder.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        self._query_embedder = BatchingEmbedder(embedder)  # concurrent turns share model batches

    def warm_up(self) -> None:
        self.index.warm_up()

    async def run(self, query: str, *, limit: int | None = None) -> list[Passage]:
        """Up to ``limit`` (default: the ``candidates`` setting) passages, best first, with their scores."""
        if not query.strip():
            return []
        return (await self._search_all([query], limit or self.settings.candidates))[0]

    async def _search_all(self, queries: list[str], limit: int) -> list[list[Passage]]:
        """One ranking per query; the queries are embedded together in one batch and searched together."""
        return (await self._search_with_dense(queries, limit))[0]

    async def _search_with_dense(self, queries: list[str], limit: int) -> tuple[list[list[Passage]], list[Ranking]]:
        """The rankings and each query's dense list (empty without dense retrieval)."""
        vectors = None
        if self.settings.fusion != "bm25":
            vectors = np.asarray(await self._query_embedder.embed(queries), dtype=np.float32)
        return await asyncio.to_thread(self._search, queries, vectors, limit)

    def _search(
        self, queries: list[str], vectors: np.ndarray | None, limit: int
    ) -> tuple[list[list[Passage]], list[Ranking]]:
        fusion = self.settings.fusion
        depth = max(LIST_DEPTH, limit)
        nothing: list[Ranking] = [[] for _ in queries]
        lexical = self.index.lexical(queries, depth) if fusion != "dense" else nothing
        dense = self.index.dense(vectors, depth) if vectors is not None else nothing
        if fusion == "bm25":
            ranked = [found[:limit] for found in lexical]
        elif fusion == "dense":
            ranked = [found[:limit] for found in dense]
        else:
            ranked = [self.fuse(words, meaning)[:limit] for words, meaning in zip(lexical, dense, strict=True)]
        dense_scores = [dict(found) for found in dense]
        if vectors is not None:  # every candidate gets its cosine similarity, the score thresholds apply to
            missing = [[key for key, _ in r if key not in d] for r, d in zip(ranked, dense_scores, strict=True)]
            if any(missing):
                for scores, found in zip(dense_scores, self.index.similarity(vectors, missing), strict=True):
                    scores.update(found)
        chunks = self.index.passages(sorted({key for r in ranked for key, _ in r}))
        passages = [
            [
                Passage(
                    id=chunks[key].id,
                    text=chunks[key].text,
                    source=chunks[key].source,
                    heading=chunks[key].heading,
                    score=score,
                    bm25_score=words.get(key),
                    dense_score=meaning.get(key),
                )
                for key, score in r
                if key in chunks
            ]
            for r, words, meaning in zip(ranked, map(dict, lexical), dense_scores, strict=True)
        ]
        return passages, dense

    def fuse(self, lexical: Ranking, dense: Ranking) -> Ranking:
        """One query's BM25 and dense lists combined as the ``fusion`` setting says: reciprocal rank fusion, or the
        sum of per-query normalised scores (``combsum``; ``combmnz`` also multiplies by the number of lists that
        found the passage), each list weighted by ``bm25_weight`` / ``dense_weight``."""
        weighted = [(self.settings.bm25_weight, lexical), (self.settings.dense_weight, dense)]
        if self.settings.fusion == "rrf":
            return weighted_rrf(weighted, k=self.settings.rrf_k)
        return normalised_sum(
            weighted, method=self.settings.fusion_normalisation, mnz=self.settings.fusion == "combmnz"
        )

    async def run_many(
        self,
        queries: Sequence[str],
        *,
        limit: int | None = None,
        message: str | None = None,
        weights: Sequence[float] | None = None,
    ) -> Fused:
        """Several phrasings of one need (e.g. a history-expanded query, then the bare message): each is retrieved
        and the rankings are fused by reciprocal rank fusion, the first query at weight 1 and each other one at
        ``alternate_query_weight`` scaled by how clear its dense list's head is against the first query's
        (:mod:`anaphora.retrieval.query_fusion`), never above 1; when ``message`` (the user's words) is one of them
        and its head is at least as clear as the first query's, it is retrieved alone; when it is the first query,
        an alternate joins only with a head much clearer than its own; and in any case its own best ``top_k // 2``
        passages stay within the first ``top_k``. ``weights`` (one per distinct query, in order)
        overrides the weights, for experiments."""
        limit = limit or self.settings.candidates
        queries = list(dict.fromkeys(q for q in queries if q.strip()))
        if len(queries) <= 1:
            return Fused(await self.run(queries[0], limit=limit), (1.0,)) if queries else Fused()
        rankings, dense = await self._search_with_dense(queries, max(LIST_DEPTH, limit))
        typed = queries.index(message) if message in queries else None
        if typed is not None and typed > 0 and dense[typed] and dense[typed][0][1] < self.settings.similarity_threshold:
            # nothing the message finds alone passes the similarity floor: a clear head among passages that are
            # all off the topic ("does any of what you told me change?") is no reason to retrieve it alone
            typed = None
        if weights is None:
            weights = query_weights(
                [head_margin(d) for d in dense], self.settings.alternate_query_weight, message=typed
            )
        elif len(weights) != len(queries):
            raise ValueError(f"{len(weights)} weights for {len(queries)} distinct queries")
        by_id = {p.id: p for ranking in reversed(rankings) for p in ranking}
        index = {pid: n for n, pid in enumerate(by_id)}
        fused = weighted_rrf(
            [(w, [(index[p.id], p.score) for p in ranking]) for w, ranking in zip(weights, rankings, strict=True)],
            k=self.settings.rrf_k,
        )
        ids = list(by_id)
        ranked = []
        for key, score in fused[:limit]:
            passage = by_id[ids[key]]
            passage.score = score  # the passages are this call's own (made by _search): rescored, not copied
            ranked.append(passage)
        if typed is not None:
            ranked = keep_in_head(ranked, rankings[typed], head=self.settings.top_k)[:limit]
        return Fused(ranked, weights)
