"""The embedded passage index: BM25 (bm25s) and dense (exact scan or hnswlib) over the SQLite corpus, in process.

It implements :class:`~anaphora.store.protocols.PassageIndex` on top of :class:`~anaphora.retrieval.IndexCache`,
whose indexes are derived from the chunk table and rebuilt in the background when the corpus generation changes;
passages are read back from SQLite by key and kept in a bounded cache for the newest corpus generation seen (every
turn reads its 25 candidates, and under load those reads queue on the one SQLite connection that also stores the
turns). While an older generation of the indexes serves, a passage deleted since is left out, because its key no
longer reads back. Searches are CPU work of
a millisecond or two, so they run inline in the caller's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from anaphora.lru import Lru
from anaphora.retrieval.bm25 import BM25Index
from anaphora.retrieval.indexes import IndexCache
from anaphora.store.protocols import Ranking, check_dimension
from anaphora.store.sqlite_corpus import SQLiteCorpus
from anaphora.types import Chunk


class EmbeddedPassageIndex:
    """The default :class:`~anaphora.store.protocols.PassageIndex`: no server, indexes cached under ``data_dir``."""

    def __init__(self, corpus: SQLiteCorpus, indexes: IndexCache, *, cached_passages: int = 20_000) -> None:
        self.corpus = corpus
        self.indexes = indexes
        self._cache: Lru[int, Chunk] = Lru(cached_passages)
        self._cache_generation = -1
        self._cache_lock = threading.Lock()

    def warm_up(self) -> None:
        """Build (or load) the indexes of the corpus as it is now, in the caller's thread; searches meanwhile use
        the previous generation."""
        self.indexes.refresh()

    def dense(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        vectors = np.asarray(vectors, dtype=np.float32)
        index = self.indexes.get().dense
        check_dimension(vectors, index.dim)
        return index.search_many(vectors, k)

    def lexical(self, queries: Sequence[str], k: int) -> list[Ranking]:
        index = self.indexes.get().bm25
        return [index.search(query, k) if query.strip() else [] for query in queries]

    def term_statistics(self) -> BM25Index:
        """Document frequencies of the current generation's BM25 tokens (what expansion-term selection reads)."""
        return self.indexes.get().bm25

    def similarity(self, vectors: np.ndarray, keys: Sequence[Sequence[int]]) -> list[dict[int, float]]:
        vectors = np.asarray(vectors, dtype=np.float32)
        index = self.indexes.get().dense
        check_dimension(vectors, index.dim)
        return [index.similarity(vector, list(wanted)) for vector, wanted in zip(vectors, keys, strict=True)]

    def passages(self, keys: Sequence[int]) -> dict[int, Chunk]:
        self.indexes.get()
        generation = self.indexes.seen_generation  # a key's passage changes only with the corpus generation
        with self._cache_lock:
            if generation != self._cache_generation:
                self._cache.clear()
                self._cache_generation = generation
            found = self._cache.get_many(keys)
        missing = [key for key in keys if key not in found]
        if missing:
            loaded = self.corpus.chunks(missing)
            found.update(loaded)
            with self._cache_lock:
                if generation == self._cache_generation:
                    self._cache.put_many(loaded.items())
        return found

    def neighbours(self, ids: Sequence[str], span: int) -> dict[str, list[Chunk]]:
        """Read from the SQLite corpus as it is now (one query; not cached: a document replaced since keeps its
        passage ids, with other text around them)."""
        return self.corpus.neighbours(ids, span)

    def close(self) -> None:
        return None  # lives in the SQLite database, which its owner closes
