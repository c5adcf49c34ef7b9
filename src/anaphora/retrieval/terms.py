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

A specific word may still be none of the topic's: the talk around it ("thanks for clarifying", "I meant", "oh god,
big fan") is rare in an encyclopedia too. :func:`on_topic` keeps the words that co-occur with the rest of them in
the passages they find together (pseudo-relevance feedback, in the spirit of RM3's feedback documents).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from anaphora.retrieval.bm25 import bm25_tokens

GENERIC_BELOW = 0.2  # specificity under which a word is generic: it occurs in more than N^0.8 passages
FEEDBACK_PASSAGES = 10  # the passages that best match the conversation's words: its topic, as the corpus sees it
NAMES_TOPIC = 0.5  # specificity from which a word names a topic on its own: it occurs in at most sqrt(N) passages


class TermStatistics(Protocol):
    """Document frequencies of the lexical index's tokens (stemmed, stop-words removed, as BM25 sees them), and
    their co-occurrence in the passages a query finds."""

    @property
    def passages(self) -> int: ...

    def document_frequencies(self, tokens: list[str]) -> dict[str, int]: ...

    def feedback(self, query_tokens: list[str], tokens: list[str], depth: int) -> dict[str, int]:
        """In how many of the ``depth`` passages that best match ``query_tokens`` each of ``tokens`` occurs."""
        ...


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


def generic(words: Sequence[str], statistics: TermStatistics | None) -> list[str]:
    """The words, in their order, that the corpus uses everywhere: each of their tokens occurs in more than
    ``N^0.8`` passages (a docs site's own product name, "traefik" on Traefik's site). Sharing one says nothing about
    relevance. None without statistics."""
    if statistics is None or statistics.passages <= 1 or not words:
        return []
    tokens, frequencies = token_frequencies(words, statistics)
    passages = statistics.passages
    return [
        word
        for word, ts in zip(words, tokens, strict=True)
        if ts and all(frequencies.get(t, 0) > 0 and specificity(frequencies[t], passages) < GENERIC_BELOW for t in ts)
    ]


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


def on_topic(words: Sequence[str], statistics: TermStatistics | None) -> list[str]:
    """The words, in their order, that co-occur with the conversation's topic in this corpus (pseudo-relevance
    feedback, as in RM3): the :data:`FEEDBACK_PASSAGES` passages that best match all of them stand for the topic,
    and a word none of them contains is left out. The topic's own words are there; the talk around it ("thanks for
    clarifying", "I meant", "oh god, big fan") is not, unless it found a passage of its own that outranks the
    topic's. All of them when there are no statistics."""
    if statistics is None or statistics.passages <= 1 or not words:
        return list(words)
    tokens = bm25_tokens(list(words))
    distinct = sorted({t for ts in tokens for t in ts})
    support = statistics.feedback([t for ts in tokens for t in ts], distinct, FEEDBACK_PASSAGES)
    return [word for word, ts in zip(words, tokens, strict=True) if any(support[t] > 0 for t in ts)]


def on_topic_support(topic: Sequence[str], words: Sequence[str], statistics: TermStatistics) -> dict[str, bool]:
    """For each of ``words``, whether the :data:`FEEDBACK_PASSAGES` passages that best match the ``topic`` words
    use it: the corpus's own sense of what belongs to a topic (a follow-up that names such a word stays on it)."""
    topic_tokens = [t for ts in bm25_tokens(list(topic)) for t in ts]
    tokens = bm25_tokens(list(words))
    distinct = sorted({t for ts in tokens for t in ts})
    support = statistics.feedback(topic_tokens, distinct, FEEDBACK_PASSAGES)
    return {word: any(support.get(t, 0) > 0 for t in ts) for word, ts in zip(words, tokens, strict=True)}
