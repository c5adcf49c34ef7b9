"""Validation of model-written search queries. Small models answer instead of rewriting, loop, invent a question
from "hello", or switch language; a rewrite that shows any of these is discarded.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from anaphora.text import content_set, stem, words
from anaphora.types import Message

_PREAMBLE = re.compile(
    r"^\s*(?:(?:the\s+)?(?:standalone|rewritten|reformulated|search|new|final)\s+(?:question|query)|query|question|"
    r"rewrite|output|user|last message)\s*(?::|\s[-–])\s*",  # "Query:" or "Query - ", not "Query-time"
    re.IGNORECASE,
)
_ANSWER_OPENERS = re.compile(
    r"^\s*(?:yes|no|sure|certainly|of course|absolutely|here(?:'s| is| are)|the answer|i\b|i'm|as an|you can|"
    r"you should|you need|it is|it's|there is|there are|they are|this is|that is|hello|hi|thanks|thank you)\b",
    re.IGNORECASE,
)
# words that frame a query without adding a topic; a rewrite may introduce these
_FRAMING = frozenset(
    stem(w)
    for w in [
        "tell",
        "explain",
        "describe",
        "information",
        "info",
        "details",
        "detail",
        "difference",
        "differences",
        "compare",
        "comparison",
        "mean",
        "meaning",
        "use",
        "used",
        "using",
        "work",
        "works",
        "way",
        "ways",
        "step",
        "steps",
        "example",
        "examples",
        "list",
        "happen",
        "happens",
        "need",
        "get",
        "make",
        "find",
        "know",
        "question",
        "regarding",
        "related",
        "specifically",
        "please",
        "more",
        "also",
        "other",
    ]
)
MAX_WORDS = 48


def strip_preamble(text: str) -> str:
    """Remove a leading "Standalone question:"-style label and wrapping quotes; keep the first non-empty line
    only when the rest is empty."""
    cleaned = _PREAMBLE.sub("", text.strip())
    return cleaned.strip().strip("\"'“”‘’`").strip()


def _script(text: str) -> str | None:
    """The dominant writing system of the letters in ``text`` (LATIN, CYRILLIC, CJK, ...)."""
    if text.isascii():
        return "LATIN" if any(ch.isalpha() for ch in text) else None
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            counts[name.split(" ")[0] if name else "?"] += 1
    return counts.most_common(1)[0][0] if counts else None


def _loops(text: str) -> bool:
    tokens = words(text)
    trigrams = Counter(zip(tokens, tokens[1:], tokens[2:], strict=False))
    if trigrams and trigrams.most_common(1)[0][1] >= 3:
        return True
    run = 1
    for a, b in itertools.pairwise(tokens):
        run = run + 1 if a == b else 1
        if run >= 4:
            return True
    return False


def _sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()])


def validate_rewrite(question: str, history: Sequence[Message], rewrite: str) -> list[str]:
    """Reasons to reject ``rewrite`` (empty list: accept)."""
    reasons: list[str] = []
    text = rewrite.strip()
    if not text:
        return ["empty"]
    if " ".join(words(text)) == " ".join(words(question)):
        return []  # the message repeated unchanged: what the rewriter is told to do with standalone messages
    if "\n" in text:
        reasons.append("multi-line")
    question_words = words(question)
    rewrite_words = words(text)
    if len(rewrite_words) > max(MAX_WORDS, 3 * len(question_words)) or len(text) > 400:
        reasons.append("too long")
    if (
        _ANSWER_OPENERS.match(text)
        or _sentences(text) > 2
        or ("?" in question and "?" not in text and len(rewrite_words) > len(question_words) + 15)
    ):
        reasons.append("answers instead of asking")
    if _loops(text):
        reasons.append("loops")
    asked = content_set(question)
    kept = content_set(text)
    if asked and len(asked & kept) / len(asked) < 0.5:
        reasons.append("drops the user's words")
    invented = kept - asked - _FRAMING
    if invented:  # only then is the history worth reading (each message's words are a cached set)
        invented = {w for w in invented if not any(w in content_set(m.content) for m in history)}
    if invented:
        reasons.append(f"introduces words from nowhere ({', '.join(sorted(invented)[:5])})")
    if _script(question) and _script(text) and _script(question) != _script(text):
        reasons.append("switched language")
    return reasons
