"""Dense vectors in a usearch HNSW index (inner product on normalised vectors = cosine similarity)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from usearch.index import Index

EXACT_BELOW = 20_000  # below this many vectors an exact scan is as fast as HNSW and loses nothing


class DenseIndex:
    def __init__(self, index: Index) -> None:
        self.index = index

    @classmethod
    def build(cls, keys: np.ndarray, vectors: np.ndarray | None, dim: int) -> DenseIndex:
        index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=128, expansion_search=64)
        if vectors is not None and len(keys):
            index.add(keys.astype(np.uint64), vectors.astype(np.float32), threads=0)
        return cls(index)

    def save(self, path: Path) -> None:
        self.index.save(str(path))

    @classmethod
    def load(cls, path: Path) -> DenseIndex:
        return cls(Index.restore(str(path), view=False))

    def __len__(self) -> int:
        return len(self.index)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (chunk key, cosine similarity), best first."""
        if len(self.index) == 0:
            return []
        k = min(k, len(self.index))
        matches = self.index.search(vector.astype(np.float32), k, exact=len(self.index) < EXACT_BELOW)
        return [(int(key), 1.0 - float(distance)) for key, distance in zip(matches.keys, matches.distances,
                                                                            strict=True)]
