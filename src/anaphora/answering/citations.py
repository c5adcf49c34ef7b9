"""Which passages an answer used: the ids the model cited, else attribution by word overlap."""

from __future__ import annotations

import re
from collections.abc import Sequence

from anaphora.text import content_set
from anaphora.types import Citation, Passage

BRACKETED = re.compile(r"\[([^\[\]\n]{1,200})\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MIN_SENTENCE_WORDS = 3
MIN_OVERLAP = 0.6


def cited_ids(answer: str, known: Sequence[str]) -> list[str]:
    """Ids written in square brackets (``[a]``, ``[a, b]``, ``[a][b]``) that name a passage, in order."""
    known_set = set(known)
    found: list[str] = []
    for group in BRACKETED.findall(answer):
        whole = group.strip()
        parts = [whole] if whole in known_set else re.split(r"\s*[,;]\s*", whole)
        for candidate in parts:
            candidate = candidate.strip().strip("`'\"")
            if candidate.lower().startswith("id:"):
                candidate = candidate[3:].strip()
            if candidate in known_set and candidate not in found:
                found.append(candidate)
    return found


def attributed_ids(answer: str, passages: Sequence[Passage]) -> list[str]:
    """Passages that contain most content words of some answer sentence (for models that do not cite)."""
    vocabularies = [(p.id, content_set(f"{p.heading} {p.text}")) for p in passages]
    found: list[str] = []
    for sentence in _SENTENCE.split(answer):
        words = content_set(sentence)
        if len(words) < MIN_SENTENCE_WORDS:
            continue
        best_id, best = max(
            ((pid, len(words & vocab) / len(words)) for pid, vocab in vocabularies),
            key=lambda x: x[1],
            default=(None, 0.0),
        )
        if best_id and best >= MIN_OVERLAP and best_id not in found:
            found.append(best_id)
    return found


def extract_citations(answer: str, passages: Sequence[Passage]) -> list[Citation]:
    by_id = {p.id: p for p in passages}
    ids = cited_ids(answer, list(by_id))
    how = "cited"
    if not ids:
        ids, how = attributed_ids(answer, passages), "attributed"
    return [Citation(id=i, source=by_id[i].source, heading=by_id[i].heading, how=how) for i in ids]
