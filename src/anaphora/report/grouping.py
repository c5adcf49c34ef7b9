"""Near-duplicate searches grouped into topics: the deployment's own embedder, then SciPy's hierarchical
clustering (average linkage over cosine distances, cut at a distance threshold).

Why SciPy: it is already installed wherever the embedded embedder is (sentence-transformers depends on it, and on
scikit-learn, which itself builds on it), its ``linkage``/``fcluster`` pair is a plain function over a matrix with
no estimator state, and a distance threshold is what a report needs (the number of topics is not known in
advance). Without SciPy (a minimal install with the hashing embedder) searches are grouped only when they are the
same words, and the report says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anaphora.embeddings.base import Embedder

log = logging.getLogger("anaphora.report")

MIN_SIMILARITY = 0.75
"""Two searches at least this similar (cosine, on average between two groups) are the same topic."""

MAX_CLUSTERED = 3000
"""Distinct searches clustered at most (the most asked first; the rest stay groups of their own words): the
condensed distance matrix grows with the square, 3000 searches take 36 MB."""


@dataclass(frozen=True)
class Grouping:
    """``labels[i]``: the group of ``texts[i]``; ``method`` says how they were grouped (for the report)."""

    labels: list[int]
    method: str


def exact(texts: Sequence[str]) -> Grouping:
    return Grouping(list(range(len(texts))), "exact: only identical searches are grouped")


def group(texts: Sequence[str], embedder: Embedder, *, min_similarity: float = MIN_SIMILARITY) -> Grouping:
    """Group ``texts`` (distinct, most asked first). Fails open: an embedder error or missing SciPy groups only
    identical searches (logged), never fails the report."""
    if len(texts) < 2:
        return exact(texts)
    try:
        from scipy.cluster.hierarchy import fcluster, linkage
        from scipy.spatial.distance import squareform
    except ImportError:
        log.warning("scipy is not installed: the report groups identical searches only (pip install scipy)")
        return exact(texts)
    head = list(texts[:MAX_CLUSTERED])
    try:
        vectors = np.asarray(embedder.embed(head), dtype=np.float64)
    except Exception as exc:  # an optional step: the report still counts identical searches
        log.warning("the report could not embed the searches (%s): identical searches are grouped only", exc)
        return exact(texts)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)  # a zero vector is at distance 1 from everything
    distances = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0)
    np.fill_diagonal(distances, 0.0)
    tree = linkage(squareform(distances, checks=False), method="average")
    clusters = fcluster(tree, t=1.0 - min_similarity, criterion="distance")
    labels = [int(c) - 1 for c in clusters] + [len(head) + n for n in range(len(texts) - len(head))]
    method = f"scipy average-linkage clustering, cosine similarity >= {min_similarity:g}, embedder {embedder.name}"
    return Grouping(labels, method)
