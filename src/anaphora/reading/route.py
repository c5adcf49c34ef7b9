"""Turn routing: what kind of turn this is, and whether it needs retrieval at all.

The route is decided here, once, by the router stage before any model call (it decides whether the query model
is called at all): deterministic rules (greetings and thanks, requests about the conversation itself
(:mod:`anaphora.reading.intents`), turn 1), completed for later turns by the standalone test. A model's structured
analysis (``rewriter = "analysis"``) never changes the route: it is the query stage's proposal
(:attr:`~anaphora.pipeline.query.QueryPlan.proposes_skip`), which the skip gate weighs. Every skip has a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from anaphora.text import content_set, words

if TYPE_CHECKING:
    from anaphora.reading.message import Reading

# words that point back into the conversation ("there" and "other" are left out: "is there", "other than")
REFERRING = frozenset(
    {
        *("it", "its", "it's", "they", "them", "their", "theirs", "this", "that", "these", "those"),
        *("he", "him", "his", "she", "her", "hers", "ones", "same", "former", "latter"),
    }
)
_CONTINUATIONS = re.compile(
    r"^\s*(and|or|but|so|also|then|what about|how about|and what|and how|why not|same for|what else|"
    r"anything else|more on|tell me more|go on|continue)\b",
    re.IGNORECASE,
)

# the user says the topic changes, at the start of the message ("unrelated: ...", "different problem: ...",
# "switching topics, ...", "ok, separately: ...") or that it goes back to an earlier one ("back to postgres for a
# sec: ...", "going back to the tenant thing: ...")
_OPENING = r"^\s*(?:(?:ok(?:ay)?|oh|so|hey|also|btw|and|one more thing)\b[\s,.:!-]*)*"
_TOPIC_SHIFT = re.compile(
    _OPENING + r"(?:(?:totally |completely )?(?:unrelated|separately)(?: (?:problem|question|topic|issue|thing))?"
    r"\s*[:,.;!-]|(?:a |an )?(?:different|separate|new|another|other) (?:problem|question|topic|issue|thing|subject)"
    r"\s*[:,.;!-]|(?:switching|changing|change of) (?:topics?|gears|subjects?|the (?:topic|subject))\b|"
    r"on (?:another|a different|an unrelated|a separate) (?:note|topic)\b)",
    re.IGNORECASE,
)
_TOPIC_RETURN = re.compile(
    _OPENING + r"(?:(?:going|coming|getting|circling|jumping|switching) )?(?:back|returning) to\b", re.IGNORECASE
)


# words that presuppose what was said before: an addition to it ("i also need *.example.com", "on ARM too?", "does
# that hold for the chart as well?") or an alternative to it ("how would I remove one instead?"); "too" and "either"
# only at a clause's end ("too many", "either A or B" presuppose nothing)
_PRESUPPOSES = re.compile(
    r"\b(?:also|instead|as well)\b|\b(?:too|either)\s*(?:[?.!,;:)]|$)",
    re.IGNORECASE,
)


def continuation(question: str) -> bool:
    """The message carries on from the last turn: it opens as a continuation ("and on ARM?", "what about the other
    one?") or adds to or replaces what was said ("i also need *.example.com", "what if I removed one instead?")."""
    return bool(_CONTINUATIONS.match(question) or _PRESUPPOSES.search(question))


def shifts_topic(question: str) -> bool:
    """The message says it leaves the conversation's topic ("unrelated: can traefik load-balance UDP?"): it
    stands alone, whatever its pronouns point at."""
    return bool(_TOPIC_SHIFT.match(question))


def returns_to_topic(question: str) -> bool:
    """The message goes back to an earlier topic ("back to postgres for a sec: ..."): the turns it resumes are
    not the most recent ones."""
    return bool(_TOPIC_RETURN.match(question))


def mentions_reference(question: str) -> bool:
    """A pronoun or demonstrative that points into the conversation ("it", "those", "the latter")."""
    return any(t in REFERRING for t in words(question))


class TurnKind(StrEnum):
    FOLLOW_UP = "follow_up"
    NEW_QUERY = "new_query"
    CHIT_CHAT = "chit_chat"
    META = "meta"

    @property
    def needs_retrieval(self) -> bool:
        """Chit-chat and requests about the conversation are answered without the documents."""
        return self not in (TurnKind.CHIT_CHAT, TurnKind.META)


@dataclass(frozen=True, slots=True)
class Route:
    kind: TurnKind
    reason: str

    @property
    def needs_retrieval(self) -> bool:
        return self.kind.needs_retrieval


def route_by_rules(reading: Reading, has_history: bool) -> Route | None:
    """The rules' verdict, or ``None`` for a later turn that is neither chit-chat nor about the conversation (the
    standalone test tells those apart)."""
    if reading.chit_chat:
        return Route(TurnKind.CHIT_CHAT, "chit-chat: greetings, thanks or small talk")
    if has_history and reading.about_conversation:
        return Route(TurnKind.META, "about the conversation itself: answered from the history")
    if not has_history:
        return Route(TurnKind.NEW_QUERY, "first turn")
    return None


def route_by_standalone_test(reading: Reading) -> Route:
    """For a later turn the rules left undecided: a new query if it stands alone, else a follow-up."""
    if reading.shifts_topic:
        return Route(TurnKind.NEW_QUERY, "says it changes the topic")
    if reading.returns_to_topic:
        return Route(TurnKind.FOLLOW_UP, "goes back to an earlier topic")
    if reading.looks_standalone:
        return Route(TurnKind.NEW_QUERY, "stands alone")
    return Route(TurnKind.FOLLOW_UP, "refers back to the conversation")


def route_turn(reading: Reading, has_history: bool) -> Route:
    """The turn's route: the rules, completed by the standalone test (what the router stage writes)."""
    return route_by_rules(reading, has_history) or route_by_standalone_test(reading)


def history_covers(question: str, history_texts: list[str]) -> bool:
    """Every content word of the message already occurs in the conversation: the precondition for believing a
    model that says the conversation holds the answer (a message with new words needs the documents)."""
    asked = content_set(question)
    seen: set[str] = set()
    for text in history_texts:
        seen |= content_set(text)
    return bool(asked) and asked <= seen
