"""Which history words may join a follow-up's query: chosen by the corpus's own statistics.

A word from an earlier turn helps a follow-up's retrieval only if it *disambiguates in this corpus*: it must occur
in the corpus (a word no passage uses cannot select one) and be specific to a small part of it. Generic domain
vocabulary ("service", "instance", "console" in cloud documentation, where nearly every passage says them) selects
nothing, while it drags the query's embedding towards the average passage, so it carries no weight: it is left out.

Specificity is the term's inverse document frequency as a share of the largest one possible in this corpus,
``log(N / df) / log(N)``: 1 for a word in one passage, 0 for a word in every passage, independent of the corpus
size. A word counts as generic when its specificity is below 0.2, i.e. it occurs in more than ``N^0.8`` passages:
16% of ten thousand, 6% of a million. (The stricter line ``sqrt(N)``, 0.5, removed useful words on the Wikipedia
dev domain; 0.2 is the strictest floor that cost nothing on either dev domain; see docs/benchmarks.md.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from anaphora.retrieval.bm25 import bm25_tokens

GENERIC_BELOW = 0.2  # specificity under which a word is generic: it occurs in more than N^0.8 passages
NAMES_TOPIC = 0.5  # specificity from which a word names a topic on its own: it occurs in at most sqrt(N) passages


class TermStatistics(Protocol):
    """Document frequencies of the lexical index's tokens (stemmed, stop-words removed, as BM25 sees them)."""

    @property
    def passages(self) -> int: ...

    def document_frequencies(self, tokens: list[str]) -> dict[str, int]: ...


def specificity(document_frequency: int, passages: int) -> float:
    """``log(N / df) / log(N)`` in [0, 1]; 0 for a word no passage contains (it selects nothing) or a tiny corpus."""
    if document_frequency <= 0 or passages <= 1:
        return 0.0
    return max(0.0, math.log(passages / document_frequency) / math.log(passages))


def token_frequencies(words: Sequence[str], statistics: TermStatistics) -> tuple[list[list[str]], dict[str, int]]:
    """Each word's tokens as the lexical index sees them (a word may give several, "x86-64"), and every token's
    document frequency, read in one call."""
    tokens = bm25_tokens(list(words))
    return tokens, statistics.document_frequencies(sorted({t for ts in tokens for t in ts}))


def word_specificity(words: Sequence[str], statistics: TermStatistics) -> dict[str, float]:
    """Each word's specificity: that of its most specific token."""
    tokens, frequencies = token_frequencies(words, statistics)
    passages = statistics.passages
    return {
        word: max((specificity(frequencies.get(t, 0), passages) for t in ts), default=0.0)
        for word, ts in zip(words, tokens, strict=True)
    }


def disambiguating(words: Sequence[str], statistics: TermStatistics | None) -> list[str]:
    """The words, in their order, that are specific in this corpus; all of them when there are no statistics."""
    if statistics is None or statistics.passages <= 1:
        return list(words)
    scores = word_specificity(words, statistics)
    return [word for word in words if scores[word] >= GENERIC_BELOW]


def naming(words: Sequence[str], statistics: TermStatistics | None) -> list[bool]:
    """For each word, whether it names a topic on its own in this corpus: it singles out at most ``sqrt(N)``
    passages, or no passage uses it at all (then it names something the corpus does not cover, which no earlier
    turn can make it about). Stop-words and, without statistics, every word name nothing."""
    if statistics is None or statistics.passages <= 1 or not words:
        return [False] * len(words)
    tokens, frequencies = token_frequencies(words, statistics)
    passages = statistics.passages
    return [
        any(frequencies.get(t, 0) == 0 or specificity(frequencies[t], passages) >= NAMES_TOPIC for t in ts)
        for ts in tokens
    ]
