"""Whether the documents can cover a question at all: the names it asks about must be words the corpus uses.

A question about a thing no passage mentions ("can it forward to Splunk?", "does it speak SAML?") cannot be
answered from the documents however well the retriever ranks: the passages it finds are about something else
(the metrics backends that do exist, the authentication that is documented), and quoting them reads as a yes. The
lexical index's own statistics say which words no passage uses; a question that names one, while no passage found
is close to it, is refused with the fixed abstention. Only a word that names something counts: one rare in English (its
Zipf frequency in ``wordfreq`` under :data:`RARE_ZIPF`: "splunk", "kerberos", "mqtt"), or one the user wrote as a name
(:func:`written_as_names`: "KEDA", "WSL2", "run it on Nomad?"), or a name the world writes, as frequent in German and
French text as in English (:func:`shared_name`: "deploy it on nomad?", "send it to kafka?"); everyday words the docs
happen not to use ("tuesday", "cranking", "stuff") name no subject. Short words and statements are not enough either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from wordfreq import zipf_frequency

from anaphora.retrieval.terms import TermStatistics, token_frequencies
from anaphora.text import STOPWORDS
from anaphora.types import Passage

MIN_LETTERS = 3  # shorter tokens ("ok", "k8") are abbreviations or noise, not names
RARE_ZIPF = 2.5  # rarer than ~3 in 10 million words of English; chosen leave one corpus out (docs/benchmarks.md)
_QUESTION = re.compile(
    r"^\W*(\w+[,:]\s+)?(how|what|which|where|why|when|who|can|could|does|do|is|are|will|would|should|may)\b", re.I
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9#+.\-]*[A-Za-z0-9+#]|[A-Za-z]{3,}")


def unused_words(question: str, statistics: TermStatistics | None) -> list[str]:
    """The words of ``question`` that no passage of the corpus uses (every one of their index tokens has document
    frequency 0), in order; ``[]`` without statistics or an empty corpus."""
    if statistics is None or statistics.passages <= 1:
        return []
    words = [w.strip(".-").lower() for w in _WORD.findall(question)]
    words = [w for w in dict.fromkeys(words) if w not in STOPWORDS and sum(c.isalpha() for c in w) >= MIN_LETTERS]
    if not words:
        return []
    tokens, frequencies = token_frequencies(words, statistics)
    return [
        word
        for word, ts in zip(words, tokens, strict=True)
        if any(sum(c.isalpha() for c in t) >= MIN_LETTERS and frequencies.get(t, 0) == 0 for t in ts)
    ]


_NAME = re.compile(r"(?<![\w.])([A-Z][a-z]*[A-Z0-9][\w]*|[A-Z]{2,}[\w]*|[a-z]+\d[\w]*|[A-Z][a-z]+)(?![\w])")
_VERSION = re.compile(r"v?\d+(?:\.\d+)*", re.I)
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|\n\s*)\W*$")  # a line opens a sentence too


def written_as_names(question: str) -> set[str]:
    """The words the user wrote as names: an inner capital or a digit ("KEDA", "WSL2", "DataDog", "k8s"), or a
    capital that does not open a sentence ("run it on Nomad?"). A name can be an everyday English word ("Nomad",
    "Iceberg", "Ruby"): how it is written says it names a product, a format or a platform."""
    found = set()
    for match in _NAME.finditer(question):
        word = match.group(1)
        if _VERSION.fullmatch(word):
            continue  # "v3" names a version of what the docs cover, not a subject of its own
        opens = bool(_SENTENCE_START.search(question[: match.start()]))
        if word[1:] != word[1:].lower() or any(c.isdigit() for c in word) or not opens:
            found.add(word.lower())
    return found


# languages whose text a name of the world's (a product, a platform, a format) is written in as in English's
NAMES_SHARED_WITH = ("de", "fr")
SHARED_ZIPF = 2.0  # used in each of them at least this often
COMMON_ZIPF = 3.5  # and not this common in English ("tuesday", "stuff" are written everywhere too)


def shared_name(word: str) -> bool:
    """A name the world writes, though common enough in English not to be :func:`rare`: as frequent in German and
    French text as a word of theirs ("nomad", "kafka", "lambda", "helm", "doppler", "nfs"), and not a common word of
    English. Words of English the docs do not use ("doable", "weekday", "cranking", "hoards") are written in English
    only. One word of letters only: wordfreq measures a compound ("on-prem") by its parts. Each language's word list
    (about 40 MB) is read on first use, when a question names a word no passage uses."""
    if not word.isalpha() or not word.isascii():
        return False
    if english_frequency(word) >= COMMON_ZIPF:
        return False
    return all(zipf_frequency(word, language) >= SHARED_ZIPF for language in NAMES_SHARED_WITH)


def rare(word: str, below: float = RARE_ZIPF) -> bool:
    """The word is rare in English (a product or protocol name, not an everyday word the docs do not use). An
    inflected form is as common as its word: "misbehaves" is rarer than "misbehave" in any corpus, and names no
    product for it."""
    return english_frequency(word) < below


def english_frequency(word: str) -> float:
    """The word's Zipf frequency in English, as its most frequent form (:func:`base_forms`): what :func:`rare` and
    :func:`shared_name` read."""
    return max(zipf_frequency(form, "en") for form in base_forms(word))


_SUFFIXES = (("ies", "y"), ("ied", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e"))


def base_forms(word: str) -> list[str]:
    """``word`` and what it is with a regular English inflection taken off ("misbehaves" -> "misbehave",
    "flushed" -> "flush"); wrong guesses ("bus" -> "bu") are words nobody writes, so they never make a word common.
    (wordfreq has no lemmatiser, and a full one would be a large dependency for this one use.)"""
    forms = [word]
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_LETTERS:
            forms.append(word[: -len(suffix)] + replacement)
    return forms


def asks(message: str) -> bool:
    """The message asks something (a statement about the user's setup is not refused)."""
    return "?" in message or bool(_QUESTION.match(message))


# a name of several capitalised words ("Redis Cluster", "Django Channels", "Azure DevOps"); the first may open the
# sentence. An acronym is a qualifier of its own ("Linux ARM" is a platform and an architecture), not part of a name
_MULTIWORD_NAME = re.compile(r"(?<![\w.'-])([A-Z][a-z][\w]*(?:[ \t]+[A-Z][a-z][\w]*)+)(?![\w'-])")


# a protocol's or a format's version written with a slash ("HTTP/2", "HTTP/3.0"): the index reads "http" and "2"
_PROTOCOL_VERSION = re.compile(r"(?<![\w/])([A-Za-z]{2,})/(\d+(?:\.\d+)?)(?![\w/])")


def names_not_found(question: str, passages: Sequence[Passage]) -> list[str]:
    """The names of several words the question writes ("a Redis Cluster", "over Django Channels"), and the versions
    of a protocol it writes with a slash ("HTTP/2"; found as "HTTP/2", "HTTP2" or "HTTP 2"), that none of the
    passages the search found holds as a phrase. Each word may be everywhere in the corpus ("redis", "cluster") and
    the thing still be nowhere: a page about it would have been found by its words. A name that opens the sentence
    with one capitalised word of its own ("Can Traefik ...") is no name of several words."""
    if not asks(question):
        return []
    texts: list[str] = []  # the passages' text, read only once a question writes such a name
    found = []
    for match in _PROTOCOL_VERSION.finditer(question):  # "HTTP/2": its words are everywhere, the version nowhere
        texts = texts or [" ".join(p.text.lower().split()) for p in passages]
        name, number = match.group(1).lower(), match.group(2)
        if not any(re.search(rf"\b{name}\s?/?\s?v?{re.escape(number)}(?!\d)", text) for text in texts):
            found.append(match.group(0))
    for match in _MULTIWORD_NAME.finditer(question):
        words = match.group(1).split()
        if match.start() == 0 or _SENTENCE_START.search(question[: match.start()]):
            words = words[1:] if len(words) > 2 else []  # "Can Traefik": a sentence's first word and a name
        name = " ".join(words)
        if len(words) < 2:
            continue
        texts = texts or [" ".join(p.text.lower().split()) for p in passages]
        if not any(name.lower() in text for text in texts):
            found.append(name)
    return found


def not_covered(
    question: str, passages: Sequence[Passage], statistics: TermStatistics | None, *, close: float
) -> list[str]:
    """What makes the question one the documents do not cover, or ``[]``: a name of several words no passage found
    holds (:func:`names_not_found`), or an unused word (a name as written or as other languages write it, or rare
    in English) when no passage found is ``close`` to the query (dense similarity at least ``close``: then the
    right page was found, and the unknown word is the user's own name for something on it)."""
    phrases = names_not_found(question, passages)
    if phrases:
        return phrases
    names = written_as_names(question)
    unused = unused_words(question, statistics) if asks(question) else []
    missing = [w for w in unused if rare(w) or w in names or shared_name(w)]
    if not missing:
        return []
    best = max((p.dense_score for p in passages if p.dense_score is not None), default=0.0)
    return missing if best < close else []
