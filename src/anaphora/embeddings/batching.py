"""Micro-batching of concurrent embedding requests: one worker thread, one model batch for many turns.

Under concurrent load every turn embeds its queries; done one call per turn in separate threads, the CPU runs many
small batches side by side (and torch's own threads oversubscribe the cores). Coalescing the requests that arrive
while a batch runs into the next batch costs each turn little latency and multiplies throughput.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from anaphora.embeddings.base import Embedder, embeddings_persisted, unpersisted_embeddings


class BatchingEmbedder:
    """Async front of a (blocking) embedder: requests made while a batch runs are embedded together next."""

    def __init__(self, embedder: Embedder, *, max_batch: int = 64) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray], bool]] = []  # texts, result, persisted
        self._worker: asyncio.Task | None = None
        self.batches = 0  # model calls made, for tests and benchmarks

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future, embeddings_persisted()))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch, size = [], 0
            persisted = self._pending[0][2]  # a batch is all one kind: the cache writes of a turn that stores
            while (
                self._pending
                and self._pending[0][2] == persisted
                and (not batch or size + len(self._pending[0][0]) <= self.max_batch)
            ):
                texts, future, _ = self._pending.pop(0)
                batch.append((texts, future))
                size += len(texts)
            flat = [text for texts, _ in batch for text in texts]
            try:
                vectors = await asyncio.to_thread(self._embed, flat, persisted)
                self.batches += 1
            except Exception as exc:  # every waiting turn gets the error
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for texts, future in batch:
                if not future.done():
                    future.set_result(vectors[start : start + len(texts)])
                start += len(texts)

    def _embed(self, texts: list[str], persisted: bool) -> np.ndarray:
        """In the worker thread: the batch's texts, written to a cache behind the embedder only if ``persisted``
        (the batch worker runs in the context of whichever turn started it, not of each text's turn)."""
        with unpersisted_embeddings(not persisted):
            return self.embedder.embed(texts)
