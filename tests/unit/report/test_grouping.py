"""Near-duplicate searches grouped with the embedder and SciPy's hierarchical clustering; failing open."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from anaphora.report.grouping import group

pytestmark = pytest.mark.unit


class TopicEmbedder:
    """A fake embedder: each text's vector is its topic's axis (the first word that names one), plus a little of
    the text's own direction, so texts on one topic are near (cosine > 0.9) and different topics orthogonal."""

    name = "topic-fake"
    TOPICS = ("install", "upgrade", "backup")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), len(self.TOPICS) + 1))
        for row, text in enumerate(texts):
            hits = [n for n, topic in enumerate(self.TOPICS) if topic in text.lower()]
            vectors[row, hits[0] if hits else len(self.TOPICS)] = 1.0
            vectors[row, (row + 1) % vectors.shape[1]] += 0.2
        return vectors

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class BrokenEmbedder(TopicEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("the embedder is down")


def test_near_duplicates_share_a_group_and_topics_do_not() -> None:
    texts = ["install kestrel on linux ARM", "how to install kestrel on ARM", "upgrade kestrel", "backup the data"]
    grouping = group(texts, TopicEmbedder(), min_similarity=0.75)
    labels = grouping.labels
    assert labels[0] == labels[1]
    assert len({labels[0], labels[2], labels[3]}) == 3
    assert "scipy" in grouping.method and "topic-fake" in grouping.method


def test_a_threshold_of_one_keeps_every_search_apart() -> None:
    texts = ["install kestrel on linux ARM", "how to install kestrel on ARM"]
    assert len(set(group(texts, TopicEmbedder(), min_similarity=1.0).labels)) == 2


def test_an_embedder_failure_groups_identical_searches_only() -> None:
    grouping = group(["install a", "install b"], BrokenEmbedder())
    assert grouping.labels == [0, 1] and grouping.method.startswith("exact")


def test_zero_vectors_do_not_break_the_clustering() -> None:
    class Zero(TopicEmbedder):
        def embed(self, texts):
            return np.zeros((len(texts), 4))

    assert len(group(["a", "b", "c"], Zero()).labels) == 3


def test_without_scipy_identical_searches_are_grouped_and_the_report_says_so(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "scipy.cluster.hierarchy", None)  # what a missing package looks like
    grouping = group(["install kestrel", "install kestrel on ARM"], TopicEmbedder())
    assert grouping.labels == [0, 1] and grouping.method.startswith("exact")
