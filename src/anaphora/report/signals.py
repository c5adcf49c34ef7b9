"""What one stored turn says about the documentation, read from its trace: what kind of turn it was, what was
searched for it (the resolved retrieval query, so "and on ARM?" is read as the question it stood for), and whether it
was a gap (refused, or answered with little support).

The same reading decides the hand-off ("contact support" link) when the answer is given and the report's gaps
later, so an operator sees as gaps exactly the answers their readers were offered support on.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from anaphora.text import STOPWORDS, words
from anaphora.types import TurnTrace

TurnShare = Literal["documentation", "chit_chat", "meta", "statement"]
Gap = Literal["refused", "low_support"]

LOW_SUPPORT_SHARE = 0.5
"""A checked answer whose supported units are fewer than this share of its units (filler aside) is weakly
supported: the check dropped (or marked) at least half of what the model said."""

WEAK_MATCH = 0.4
"""An answer not checked unit by unit (quoted from the passages, or the check off) is weakly supported when its
best passage's cosine similarity to the search is below this: relevant enough to pass the retrieval floor (0.30
by default), too far to be the page the reader needed."""

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s?!.。？！]+$")


def share_of(trace: TurnTrace | None) -> TurnShare:
    """The turn's kind for the report's shares: small talk, a request about the conversation itself (the router's
    ``meta`` and the turns the skip gate answered from the history), a statement about the user that was
    acknowledged, or a question for the documentation."""
    if trace is None:
        return "documentation"
    if trace.route == "chit_chat":
        return "chit_chat"
    if trace.route == "meta" or trace.retrieval_skipped or trace.answer_source == "conversation":
        return "meta"
    if trace.answer_source == "acknowledged":
        return "statement"
    return "documentation"


def searched(question: str, trace: TurnTrace | None) -> str:
    """What the turn searched for: the resolved retrieval query, or the question when the turn kept no query."""
    query = trace.query.strip() if trace is not None else ""
    return query or question.strip()


def topic_key(text: str) -> str:
    """Text that differs only in case, spacing or end punctuation counts as one search."""
    return _TRAILING.sub("", _SPACE.sub(" ", text).strip()).casefold()


def gist(text: str) -> str:
    """The search's content words, in order: what near-duplicate searches are compared on. A follow-up's search is
    often its own words plus terms from the history ("and on ARM? install Linux"), whose "and on" would otherwise
    weigh as much as what it is about."""
    kept = [w for w in words(text) if w not in STOPWORDS]
    return " ".join(kept) or text


def gap_of(trace: TurnTrace | None) -> Gap | None:
    """``refused`` (the turn abstained: nothing relevant, or nothing of the answer supported), ``low_support``
    (see :data:`LOW_SUPPORT_SHARE` and :data:`WEAK_MATCH`), or None: answered with support, or not a question for
    the documentation at all."""
    if trace is None or share_of(trace) != "documentation":
        return None
    if trace.abstained or trace.answer_source == "abstain":
        return "refused"
    units = [v for v in trace.support if v.verdict != "filler"]
    if units:
        supported = sum(v.verdict == "supported" and v.kept for v in units)
        return "low_support" if supported < LOW_SUPPORT_SHARE * len(units) else None
    if trace.answer_source in ("model", "extractive"):
        scores = [p.dense_score for p in trace.retrieved if p.dense_score is not None]
        if scores and max(scores) < WEAK_MATCH:
            return "low_support"
    return None


class Handoff(BaseModel):
    """The operator's "contact support" link, offered with an answer that is a gap (``reason``)."""

    url: str
    reason: Gap


def handoff(trace: TurnTrace | None, support_url: str) -> Handoff | None:
    """The link to offer with this answer: when the operator set one (``support_url``) and the answer is a gap."""
    reason = gap_of(trace) if support_url else None
    return Handoff(url=support_url, reason=reason) if reason else None
