"""BM25 over the chunk table with bm25s (Lucene variant, English stop-words, Snowball stemming)."""

from __future__ import annotations

import re
from pathlib import Path

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from anaphora.text import english_stemmer

K1, B = 1.5, 0.75  # Lucene's BM25 defaults (and bm25s's): the passage index and the memory indexes use them


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default token pattern (scikit-learn's)
_STOPWORDS = frozenset(STOPWORDS_EN)  # what bm25s.tokenize(stopwords="en") removes


def bm25_tokens(texts: list[str]) -> list[list[str]]:
    """Each text's tokens exactly as ``bm25s.tokenize(texts, stopwords="en", stemmer=...)`` makes them for the
    index (a test holds the two equal). Written out because queries are tokenized several times per turn and
    bm25s's function builds a progress bar and the stop-word set again for every text: ~0.3 ms per turn."""
    stemmer = english_stemmer()
    return [
        stemmer.stemWords([token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS])
        for text in texts
    ]


class BM25Index:
    """Scores every chunk for a query; ``keys`` maps bm25s's row numbers to chunk keys."""

    def __init__(self, retriever: bm25s.BM25 | None, keys: np.ndarray) -> None:
        self.retriever = retriever
        self.keys = keys

    @classmethod
    def build(cls, keys: np.ndarray, texts: list[str]) -> BM25Index:
        if not texts:
            return cls(None, keys)
        retriever = bm25s.BM25(k1=K1, b=B)
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), show_progress=False)
        retriever.index(tokens, show_progress=False)
        return cls(retriever, keys)

    def save(self, directory: Path) -> None:
        if self.retriever is not None:
            self.retriever.save(str(directory))
        np.save(directory / "keys.npy", self.keys)

    @classmethod
    def load(cls, directory: Path) -> BM25Index:
        keys = np.load(directory / "keys.npy")
        return cls(bm25s.BM25.load(str(directory)) if len(keys) else None, keys)

    @property
    def passages(self) -> int:
        """How many passages the index holds (the N of the document frequencies)."""
        return 0 if self.retriever is None else int(self.retriever.scores["num_docs"])

    def document_frequencies(self, tokens: list[str]) -> dict[str, int]:
        """How many passages contain each token (already tokenized and stemmed as by :func:`bm25_tokens`);
        0 for a token the corpus never uses."""
        if self.retriever is None:
            return {token: 0 for token in tokens}
        vocabulary = self.retriever.vocab_dict
        indptr = self.retriever.scores["indptr"]
        out = {}
        for token in tokens:
            row = vocabulary.get(token)
            out[token] = 0 if row is None else int(indptr[row + 1] - indptr[row])
        return out

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (chunk key, score), best first; empty when no query word is in the vocabulary."""
        rows, scores = self._top(bm25_tokens([query])[0], k)
        return [(int(self.keys[i]), float(scores[i])) for i in rows]

    def feedback(self, query_tokens: list[str], tokens: list[str], depth: int) -> dict[str, int]:
        """In how many of the ``depth`` passages that best match ``query_tokens`` each of ``tokens`` occurs (both
        tokenized as by :func:`bm25_tokens`): read from the postings, no passage is loaded."""
        rows, _ = self._top(query_tokens, depth)
        if not len(rows):
            return {token: 0 for token in tokens}
        vocabulary = self.retriever.vocab_dict
        indptr, indices = self.retriever.scores["indptr"], self.retriever.scores["indices"]
        found = np.zeros(self.passages, dtype=bool)  # a lookup table: no sort per token, as np.isin would do
        found[rows] = True
        out = {}
        for token in tokens:
            row = vocabulary.get(token)
            out[token] = 0 if row is None else int(found[indices[indptr[row] : indptr[row + 1]]].sum())
        return out

    def _top(self, query_tokens: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The row numbers of the top ``k`` passages with a positive score, best first, and every row's score."""
        if self.retriever is None:
            return np.empty(0, dtype=np.int64), np.empty(0)
        ids = self.retriever.get_tokens_ids(query_tokens)
        if not ids:
            return np.empty(0, dtype=np.int64), np.empty(0)
        scores = self.retriever.get_scores_from_ids(ids)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return top[scores[top] > 0], scores
