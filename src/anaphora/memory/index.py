"""An in-process search index over one user's memory items: BM25 with the user's own document frequencies and an
exact cosine scan of their vectors. Appendable, so a store keeps it in step with new items without a rebuild.

Why not bm25s, as the passage index: it builds an index once and cannot add a document, and a user's memory grows
by a turn at a time (rebuilding a 6,000-item user's index after every write would cost more than the write). The
scoring is the same Lucene BM25 with the same constants (:data:`anaphora.retrieval.bm25.K1` / ``B``), over the
project's content words (:func:`anaphora.text.content_words`: English stop-words, Snowball stems).

Exact search is enough: a user with 6,000 remembered turns is a 6,000 x 384 scan (about a millisecond), and the
index never mixes users, so a leak through shared statistics or a shared graph cannot happen.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from anaphora.errors import ConfigurationError
from anaphora.memory.types import MemoryHit
from anaphora.retrieval.bm25 import K1, B
from anaphora.text import content_words


def top_hits(ids: Sequence[str], scores: np.ndarray, k: int, *, positive: bool = True) -> list[MemoryHit]:
    """The ``k`` best scores as hits, best first (ties by position, i.e. insertion order); ``positive``: only
    scores above zero (a BM25 score of 0 means no query word matched)."""
    k = min(k, len(scores))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.argsort(-scores[top], kind="stable")]
    return [MemoryHit(ids[i], float(scores[i])) for i in top if scores[i] > 0 or not positive]


class UserMemoryIndex:
    """BM25 postings and a vector matrix for one user's items; ``key`` is the store's row key, used to append only
    what is new. Thread-safe."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.max_key = 0
        self.stamp: tuple[int, str] = (0, "0")  # what the store last saw (its count of writes and of removals)
        self._lengths: list[int] = []
        self._postings: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # postings as arrays, made on first search
        self._norm: np.ndarray | None = None  # BM25's length normalisation per item, made on first search
        self._vector_ids: list[str] = []
        self._vectors: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, key: int, item_id: str, text: str, vector: np.ndarray | None) -> None:
        with self._lock:
            position = len(self.ids)
            self.ids.append(item_id)
            self.max_key = max(self.max_key, key)
            terms = content_words(text)
            self._lengths.append(len(terms))
            counts: dict[str, int] = defaultdict(int)
            for term in terms:
                counts[term] += 1
            for term, tf in counts.items():
                docs, tfs = self._postings[term]
                docs.append(position)
                tfs.append(tf)
                self._arrays.pop(term, None)
            self._norm = None
            if vector is not None:
                self._vector_ids.append(item_id)
                self._vectors.append(vector)

    def lexical(self, query: str, k: int) -> list[MemoryHit]:
        terms = set(content_words(query))
        with self._lock:
            n = len(self.ids)
            if not n or not terms:
                return []
            if self._norm is None:
                lengths = np.asarray(self._lengths, dtype=np.float32)
                self._norm = K1 * (1 - B + B * lengths / max(float(lengths.mean()), 1e-9))
            norm = self._norm
            scores = np.zeros(n, dtype=np.float32)
            for term in terms:
                if term not in self._postings:
                    continue
                if term not in self._arrays:
                    docs, tfs = self._postings[term]
                    self._arrays[term] = (np.asarray(docs), np.asarray(tfs, dtype=np.float32))
                where, tf = self._arrays[term]
                idf = math.log(1 + (n - len(where) + 0.5) / (len(where) + 0.5))
                scores[where] += idf * tf * (K1 + 1) / (tf + norm[where])
            return top_hits(self.ids, scores, k)

    def document_frequency(self, term: str) -> int:
        """In how many of the user's items the (stemmed) ``term`` occurs."""
        with self._lock:
            return len(self._postings[term][0]) if term in self._postings else 0

    def dense(self, vectors: np.ndarray, k: int) -> list[list[MemoryHit]]:
        with self._lock:
            if not self._vectors:
                return [[] for _ in range(len(vectors))]
            if self._matrix is None or len(self._matrix) != len(self._vectors):
                self._matrix = np.vstack(self._vectors).astype(np.float32, copy=False)
            matrix, ids = self._matrix, self._vector_ids[: len(self._matrix)]
        if vectors.ndim != 2 or vectors.shape[1] != matrix.shape[1]:
            got = vectors.shape[-1] if vectors.ndim else 0
            raise ConfigurationError(
                f"vectors with {got} dimensions cannot be compared with the stored {matrix.shape[1]}-dimensional "
                "memory vectors",
                hint="the embedder changed since the memories were written: set ANAPHORA_EMBEDDER back",
            )
        scores = matrix @ vectors.astype(np.float32, copy=False).T  # (items, queries): the contiguous product
        return [top_hits(ids, scores[:, q], k, positive=False) for q in range(scores.shape[1])]
