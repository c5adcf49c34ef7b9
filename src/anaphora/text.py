"""Word- and sentence-level text helpers shared by BM25, the hashing embedder, ingestion, answers and metrics."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

# The common English function words (NLTK's list): what "content words" leave out. BM25 keeps bm25s's shorter
# Lucene list, so that its figures match the published baselines.
STOPWORDS: frozenset[str] = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
    that that'll these those am is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
    haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
    weren weren't won won't wouldn wouldn't could would also""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
# a sentence ends at . ! ? followed by white space (not inside "e.g.x" or "3.5", which have no space after), but not
# at an abbreviation before a lower-case word ("Nomad, Ansible, etc. that can define ...", "e.g. a label"); a chat
# message's lower-case sentences ("we're multi-tenant. tenant `payments` ...") still end there
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_ABBREVIATION = re.compile(r"\b(?:etc|e\.g|i\.e|vs|cf|approx|incl|esp|resp|viz|al)\.$", re.IGNORECASE)
_ABBREVIATION_CHARS = 8  # the longest abbreviation with the character before it: the look-back a full stop needs


@lru_cache(maxsize=1)
def english_stemmer() -> Stemmer.Stemmer:
    """The one Snowball stemmer: content words and the BM25 tokens stem alike."""
    return Stemmer.Stemmer("english")


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.lower())


def stem(word: str) -> str:
    return english_stemmer().stemWord(word)


def content_words(text: str) -> list[str]:
    """Stemmed words that are not English stop-words, in order (duplicates kept)."""
    stemmer = english_stemmer()
    return stemmer.stemWords([w for w in words(text) if w not in STOPWORDS])


@lru_cache(maxsize=4096)
def content_set(text: str) -> frozenset[str]:
    """The distinct content words. Cached: a turn asks it of the same history messages in several stages, and
    the next turn asks again."""
    return frozenset(content_words(text))


def content_union(texts: Iterable[str]) -> frozenset[str]:
    """The content words of all ``texts`` together: what a conversation (or a user's facts) has said."""
    return frozenset().union(*(content_set(t) for t in texts))


_IDENTIFIER_WORD = re.compile(r"\w*(?:[A-Za-z][_.-]|[a-z][A-Z])[\w.-]*")
_IDENTIFIER_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


@lru_cache(maxsize=4096)
def named_words(text: str) -> frozenset[str]:
    """The content words, and the words identifiers are made of (``MISE_GITHUB_ENTERPRISE_TOKEN``: enterprise, token;
    ``allowCrossNamespace``: cross, namespace): "the enterprise token variable" names the identifier."""
    parts = (p.lower() for w in _IDENTIFIER_WORD.findall(text) for p in _IDENTIFIER_PART.findall(w))
    return content_set(text) | frozenset(content_words(" ".join(parts)))


def named_union(texts: Iterable[str]) -> frozenset[str]:
    """:func:`named_words` of all ``texts`` together: "the permissions command" names ``set_permissions``."""
    return frozenset().union(*(named_words(t) for t in texts))


@lru_cache(maxsize=4096)
def whole_word(token: str) -> re.Pattern[str]:
    """``token`` as a whole word: no word character glued to either side (``512`` is not in ``5120``). Case as
    given: callers fold both sides."""
    return re.compile(rf"(?<!\w){re.escape(token)}(?!\w)")


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences, each with the white space that follows it (joined, they give back ``text``):
    the one sentence splitter of the answers (what is quoted) and of ingestion (where a long paragraph is cut)."""
    found: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end, stop = match.end(), match.start()
        if text[end : end + 1].islower() and _ABBREVIATION.search(text, max(0, stop - _ABBREVIATION_CHARS), stop):
            continue
        found.append(text[start:end])
        start = end
    if start < len(text):
        found.append(text[start:])
    return found
