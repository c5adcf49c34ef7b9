"""Where the extractive answerer's vectors come from, so that a turn does not embed its candidate sentences again.

The passages a turn quotes from are the corpus's: the same ones come back turn after turn (the passages of a topic,
the follow-ups about it), and their sentences with them. Their vectors are kept in a bounded in-process LRU keyed
by the sentence, in front of the embedder the answerer is given (the persistent content-hash cache in the product),
so a sentence is embedded once per process at most, and a repeated one costs a dictionary lookup instead of an
embedding cache query and its LRU write. Memories' sentences (the user's own text) are not memoised here: they go to
the ``personal`` embedder, by default the same cached one. Giving the uncached embedder there keeps them out of the
shared cache (where erase cannot name the vectors of a message's single sentences), but then a turn embeds its
recalled memories again every time: measured at 3x the CPU of a warm turn (bench/NOTES.md, issue 26), so the
product does not do it yet; reusing the memory items' stored vectors is the fix. The queries go to the embedder as
retrieval's did (the same cache keys, which erase does name).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from anaphora.embeddings.base import Embedder

MAX_SENTENCES = 20_000  # about 30 MB of 384-dimensional vectors


class SentenceVectors:
    def __init__(self, embedder: Embedder, personal: Embedder | None = None, *, max_entries: int = MAX_SENTENCES):
        self.embedder = embedder
        self.personal = personal or embedder
        self.max_entries = max_entries
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # turns call from worker threads
        self.hits = self.misses = 0

    def turn(
        self, queries: Sequence[str], passages: Sequence[str], memories: Sequence[str] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """(query vectors, sentence vectors: the passages' then the memories'), L2-normalised rows. Blocking."""
        asked = self.embedder.embed(list(queries))
        parts = [self._passages(passages)]
        if memories:
            parts.append(self.personal.embed(list(memories)))
        sentences = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return _normalised(asked), _normalised(sentences)

    def _passages(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            found = {t: self._memo[t] for t in texts if t in self._memo}
            for text in found:
                self._memo.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.embedder.embed(missing)
            with self._lock:
                for text, vector in zip(missing, fresh, strict=True):
                    found[text] = self._memo[text] = vector
                while len(self._memo) > self.max_entries:
                    self._memo.popitem(last=False)
        if not texts:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
