"""Embedding across worker processes, for ingestion on a machine with more cores (``anaphora ingest --workers N``).

One process's embedder already runs its batches on several threads (ONNX Runtime's intra-op pool), but the
tokenizer, the padding and the Python around each batch run on one core. N processes, each with its own embedder
and ``cores / N`` threads, keep more cores busy. Only the embedding moves to the workers: parsing, choosing passage
ids, the embedding cache and the writes stay in the calling process, so one ingestion run is one writer, as before.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.settings import Settings

_worker_embedder: Embedder | None = None


def _start_worker(settings: Settings) -> None:
    global _worker_embedder
    from anaphora.embeddings import load_embedder

    _worker_embedder = load_embedder(settings)
    _worker_embedder.embed(["warm up"])  # load the model before the first real batch is timed against the others


def _embed_in_worker(texts: list[str]) -> np.ndarray:
    assert _worker_embedder is not None, "the pool's initializer loads the embedder"
    return _worker_embedder.embed(texts)


def threads_per_worker(settings: Settings, workers: int) -> int:
    """``embedder_threads`` when set, else the cores shared out among the workers."""
    return settings.models.embedder_threads or max(1, (os.cpu_count() or 1) // workers)


class ProcessPoolEmbedder:
    """An :class:`Embedder` that splits each call across ``workers`` processes loading the embedder ``settings``
    name. Counting tokens and the name and dimension come from ``local`` (the same embedder in this process).
    Close it (or use it as a context manager) to stop the workers."""

    def __init__(self, settings: Settings, workers: int, local: Embedder) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.local = local
        self.name = local.name
        self.workers = workers
        local.embed(["warm up"])  # an export or quantization to make is made here once, not by every worker
        worker_settings = settings.with_updates(embedder_threads=threads_per_worker(settings, workers))
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),  # no fork of a process holding threads and sessions
            initializer=_start_worker,
            initargs=(worker_settings,),
        )

    @property
    def dim(self) -> int:
        return self.local.dim

    def count_tokens(self, text: str) -> int:
        return self.local.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        # dealt out by length, so every worker gets as many long texts as short ones
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        shares = [order[w :: self.workers] for w in range(self.workers)]
        futures = [self._pool.submit(_embed_in_worker, [texts[i] for i in share]) for share in shares if share]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for share, future in zip((s for s in shares if s), futures, strict=True):
            vectors[share] = future.result()
        return vectors

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPoolEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
