"""Dense vectors: an exact scan for small corpora, an HNSW graph (hnswlib) for large ones.

Vectors are L2-normalised, so inner product = cosine similarity. Below ``exact_below`` vectors (the setting
``dense_exact_below``) a matrix product loses no recall and costs little; above it the HNSW graph keeps queries
logarithmic. The default switch is low (5,000): under concurrent turns a 10k x 384 scan takes about 1.2 ms of a
core, the graph 0.1 ms, at a recall@10 of 0.9995 against the scan (bench/stores.py). (usearch was tried first
and rejected: importing it before llama.cpp loads a GGUF makes llama.cpp fail with ``std::bad_cast`` in the same
process.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

EXACT_BELOW = 5_000


class DenseIndex:
    def __init__(self, keys: np.ndarray, dim: int, *, matrix: np.ndarray | None = None, graph=None) -> None:
        self.keys = keys
        self.dim = dim
        self.matrix = matrix
        self.graph = graph

    @classmethod
    def build(
        cls, keys: np.ndarray, vectors: np.ndarray | None, dim: int, *, exact_below: int = EXACT_BELOW
    ) -> DenseIndex:
        if vectors is None or len(keys) == 0:
            return cls(np.empty(0, dtype=np.int64), dim, matrix=np.empty((0, dim), dtype=np.float32))
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(keys) < exact_below:
            return cls(keys, dim, matrix=vectors)
        import hnswlib

        graph = hnswlib.Index(space="ip", dim=dim)
        graph.init_index(max_elements=len(keys), ef_construction=200, M=16)
        graph.add_items(vectors, keys.astype(np.int64))
        graph.set_ef(128)
        return cls(keys, dim, graph=graph)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / "keys.npy", self.keys)
        if self.graph is not None:
            self.graph.save_index(str(directory / "hnsw.bin"))
        else:
            np.save(directory / "vectors.npy", self.matrix)

    @classmethod
    def load(cls, directory: Path, dim: int) -> DenseIndex:
        keys = np.load(directory / "keys.npy")
        if (directory / "hnsw.bin").exists():
            import hnswlib

            graph = hnswlib.Index(space="ip", dim=dim)
            graph.load_index(str(directory / "hnsw.bin"), max_elements=len(keys))
            graph.set_ef(128)
            return cls(keys, dim, graph=graph)
        return cls(keys, dim, matrix=np.load(directory / "vectors.npy"))

    def __len__(self) -> int:
        return len(self.keys)

    def similarity(self, vector: np.ndarray, keys: list[int]) -> dict[int, float]:
        """Cosine similarity of ``vector`` to the stored vectors of ``keys`` (missing keys are left out)."""
        if not keys or len(self.keys) == 0:
            return {}
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self.graph is not None:
            present = [k for k in keys if k in self._positions()]
            stored = np.asarray(self.graph.get_items(present), dtype=np.float32) if present else np.empty((0,))
        else:
            present = [k for k in keys if k in self._positions()]
            stored = self.matrix[[self._positions()[k] for k in present]] if present else np.empty((0,))
        return {k: float(v) for k, v in zip(present, stored @ query if present else [], strict=True)}

    def _positions(self) -> dict[int, int]:
        if not hasattr(self, "_position_cache"):
            self._position_cache = {int(k): i for i, k in enumerate(self.keys)}
        return self._position_cache

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (chunk key, cosine similarity), best first."""
        return self.search_many(np.asarray(vector, dtype=np.float32).reshape(1, -1), k)[0]

    def search_many(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """``search`` for each row of ``vectors``, in one pass: the exact scan reads the matrix once for all of them
        (a matrix product instead of one matrix-vector product per query), the HNSW graph takes them as a batch."""
        queries = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(self.keys) == 0:
            return [[] for _ in queries]
        k = min(k, len(self.keys))
        if self.graph is not None:
            labels, distances = self.graph.knn_query(queries, k=k, num_threads=1)
            return [
                [(int(key), 1.0 - float(d)) for key, d in zip(row_labels, row_distances, strict=True)]
                for row_labels, row_distances in zip(labels, distances, strict=True)
            ]
        rankings = []
        for scores in queries @ self.matrix.T:
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top], kind="stable")]
            rankings.append([(int(self.keys[i]), float(scores[i])) for i in top])
        return rankings
