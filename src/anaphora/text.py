"""Word-level text helpers shared by BM25, the hashing embedder, citation attribution and the metrics."""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer
from bm25s.stopwords import STOPWORDS_EN

STOPWORDS: frozenset[str] = frozenset(STOPWORDS_EN)
_WORD = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.lower())


def stem(word: str) -> str:
    return _stemmer().stemWord(word)


def content_words(text: str) -> list[str]:
    """Stemmed words that are not English stop-words, in order (duplicates kept)."""
    stemmer = _stemmer()
    return stemmer.stemWords([w for w in words(text) if w not in STOPWORDS])


def content_set(text: str) -> set[str]:
    return set(content_words(text))
