"""A no-model embedder: feature hashing of stemmed words and word pairs. Deterministic, instant, lexical only.

Used by unit tests and as a dependency-free fallback; it carries no semantics beyond shared words.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence

import numpy as np

from anaphora.models.base import approx_tokens
from anaphora.text import content_words


class HashingEmbedder:
    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        terms = content_words(text)
        features = terms + [f"{a} {b}" for a, b in itertools.pairwise(terms)]
        for feature in features:
            h = zlib.crc32(feature.encode())
            vector[h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)
