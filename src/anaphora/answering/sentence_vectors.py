"""Where the extractive answerer's vectors come from, so that a turn does not embed its candidate sentences again.

The passages a turn quotes from are the corpus's: the same ones come back turn after turn (the passages of a topic,
the follow-ups about it), and their sentences with them. Their vectors are kept in a bounded in-process LRU keyed
by the sentence, in front of the embedder the answerer is given (the persistent content-hash cache in the product),
so a sentence is embedded once per process at most, and a repeated one costs a dictionary lookup instead of an
embedding cache query and its LRU write.

Memories' sentences are the user's own words. They go to the ``personal`` embedder (the uncached one in the
product: vectors of a message's single sentences in the shared cache are personal data that erasing the user cannot
name) and are kept in a second bounded LRU keyed by the user and the sentence, never shared between users, never
written anywhere, and dropped by :meth:`SentenceVectors.forget_user` when the user is erased. Without that memo a
turn embedded its recalled memories again every time (3x the CPU of a warm turn; bench/NOTES.md, issue 26). Another
server worker's memo is not reached by an erase in this one: its entries are evicted by the LRU, and only ever
served to the same user for the same sentence. The queries go to the embedder as retrieval's did (the same cache
keys, which erase does name).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.lru import Lru

MAX_SENTENCES = 20_000  # about 30 MB of 384-dimensional vectors
MAX_PERSONAL_SENTENCES = 5_000


class _Memo:
    """A bounded LRU of vectors in front of an embedder; thread-safe (turns call from worker threads)."""

    def __init__(self, embedder: Embedder, max_entries: int) -> None:
        self.embedder = embedder
        self.entries: Lru[Hashable, np.ndarray] = Lru(max_entries)
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def vectors(self, texts: Sequence[str], keys: Sequence[Hashable]) -> np.ndarray:
        with self.lock:
            found = self.entries.get_many(keys)
            missing = dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in found)
            self.hits += len(keys) - len(missing)
            self.misses += len(missing)
        if missing:
            fresh = self.embedder.embed([t for _, t in missing])
            with self.lock:
                made = [(key, vector) for (key, _), vector in zip(missing, fresh, strict=True)]
                found.update(made)
                self.entries.put_many(made)
        if not keys:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


class SentenceVectors:
    def __init__(
        self,
        embedder: Embedder,
        personal: Embedder | None = None,
        *,
        max_entries: int = MAX_SENTENCES,
        max_personal: int = MAX_PERSONAL_SENTENCES,
    ):
        self.embedder = embedder
        self._passages = _Memo(embedder, max_entries)
        self._personal = _Memo(personal or embedder, max_personal)

    @property
    def hits(self) -> int:
        return self._passages.hits

    @property
    def misses(self) -> int:
        return self._passages.misses

    def turn(
        self, queries: Sequence[str], passages: Sequence[str], memories: Sequence[str] = (), *, user: str = ""
    ) -> tuple[np.ndarray, np.ndarray]:
        """(query vectors, sentence vectors: the passages' then ``user``'s memories'), L2-normalised rows.
        Blocking."""
        asked = self.embedder.embed(list(queries))
        parts = [self._passages.vectors(passages, passages)]
        if memories:
            parts.append(self._personal.vectors(memories, [(user, text) for text in memories]))
        sentences = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return _normalised(asked), _normalised(sentences)

    def held(self, user: str) -> int:
        """How many of ``user``'s memory sentences the memo holds."""
        with self._personal.lock:
            return sum(1 for key in self._personal.entries if key[0] == user)

    def forget_user(self, user: str) -> int:
        """Drop ``user``'s memory sentences (erase); returns how many were held."""
        memo = self._personal
        with memo.lock:
            keys = [key for key in memo.entries if key[0] == user]
            for key in keys:
                memo.entries.pop(key)
        return len(keys)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
