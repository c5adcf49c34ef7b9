"""Metric definitions, as in shared/bench/README.md, so that numbers compare."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from anaphora.text import content_set


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """|top-k ∩ gold| / |gold|."""
    if not gold:
        return float("nan")
    return len(set(ranked[:k]) & set(gold)) / len(set(gold))


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """nDCG@k with binary gains (BEIR / pytrec_eval)."""
    relevant = set(gold)
    if not relevant:
        return float("nan")
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal


def resolution_recall(question: str, reference: str, ours: str) -> float | None:
    """Share of the reference rewrite's content words missing from the question that our rewrite supplies."""
    needed = content_set(reference) - content_set(question)
    if not needed:
        return None
    return len(needed & content_set(ours)) / len(needed)


def preservation(question: str, ours: str) -> float | None:
    """Share of the question's content words that our rewrite keeps."""
    words = content_set(question)
    if not words:
        return None
    return len(words & content_set(ours)) / len(words)


def _bare(text: str) -> str:
    return re.sub(r"[\s.?!]+$", "", text.strip().lower())


def is_standalone_reference(question: str, reference: str) -> bool:
    return _bare(question) == _bare(reference)


def jaccard(a: str, b: str) -> float:
    x, y = content_set(a), content_set(b)
    if not x and not y:
        return 1.0
    return len(x & y) / len(x | y)


def rouge_l_recall(reference: str, candidate: str) -> float:
    """Longest common subsequence of lower-cased words, over the reference's length."""
    ref = re.findall(r"\w+", reference.lower())
    cand = re.findall(r"\w+", candidate.lower())
    if not ref:
        return float("nan")
    previous = [0] * (len(cand) + 1)
    for r in ref:
        current = [0]
        for j, c in enumerate(cand, start=1):
            current.append(previous[j - 1] + 1 if r == c else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1] / len(ref)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_MARKER = re.compile(r"\[[^\[\]\n]{1,200}\]")


def answer_tokens(text: str) -> list[str]:
    """SQuAD-style normalisation (lower-case, punctuation and articles removed), citation markers stripped first."""
    text = _MARKER.sub(" ", text.lower())
    text = re.sub(r"[^\w\s]", " ", text)
    return _ARTICLES.sub(" ", text).split()


def k_precision(answer: str, knowledge: Sequence[str]) -> float | None:
    """Share of the answer's tokens that occur in the knowledge shown to the generator (MTRAG's k_prec)."""
    tokens = answer_tokens(answer)
    if not tokens:
        return None
    known = set(answer_tokens(" ".join(knowledge)))
    return sum(1 for t in tokens if t in known) / len(tokens)


def unsupported_risky_tokens(answer: str, sources: Sequence[str]) -> list[str]:
    """Tokens with a digit or one of ``/ _ . = :`` (code, paths, URLs, numbers, versions, phone numbers) that occur
    in none of the sources (shared/bench/README.md's definition, independent of the product's own check)."""
    haystack = " ".join(sources).lower()
    found = []
    for raw in _MARKER.sub(" ", answer).split():
        token = raw.strip("()[]{}<>,;!?\"'`*").rstrip(".:").lower()
        if token and (any(c.isdigit() for c in token) or any(c in token for c in "/_.=:")) and token not in haystack:
            found.append(token)
    return found
