"""Turn routing: what kind of turn this is, and whether it needs retrieval at all.

Deterministic rules decide what they can (greetings and thanks, requests about the conversation itself, turn 1);
the model's structured analysis (:mod:`anaphora.pipeline.analysis`) decides the rest. Every skip has a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from anaphora.text import content_set, words

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


def continues(question: str) -> bool:
    """The message carries on from the last turn ("and on ARM?", "what about the other one?")."""
    return bool(_CONTINUATIONS.match(question))


def refers_back(question: str) -> bool:
    """The message points into the conversation: a pronoun or demonstrative, or it continues."""
    return continues(question) or any(t in REFERRING for t in words(question))


def looks_standalone(question: str) -> bool:
    """A message stands alone unless it refers back or is too short to name a topic by word count alone (the
    history expansion also asks the corpus which of a message's words name a topic)."""
    return not refers_back(question) and len(content_set(question)) >= 3


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
    decided_by: str = "rules"  # "rules" or "model"

    @property
    def needs_retrieval(self) -> bool:
        return self.kind.needs_retrieval


# social words and phrases; a message made only of these is chit-chat ("thanks, and on ARM?" is not)
_SOCIAL = re.compile(
    r"\b(hi|hello|hey|hiya|howdy|good (morning|afternoon|evening|night)|thanks?( you)?( (so|very) much)?|thx|ty|"
    r"cheers|great|awesome|perfect|cool|nice|ok(ay)?|alright|got it|makes sense|understood|sounds good|"
    r"(that )?helps( (a lot|a bunch|so much))?|(that )?helped|"
    r"(that('s| is| was) )?(very |really |super )?(helpful|useful|clear|great|perfect|nice)|"
    r"bye|goodbye|see you|have a (nice|good) day|you('re| are) (the best|great|awesome)|no problem|sure|yes|no|"
    r"how are you( doing)?|who are you|what can you do|lol|wow|please|much appreciated|appreciate it|all good)\b",
    re.IGNORECASE,
)
# requests about the conversation itself: answered from the history, never from the documents
_END = r"\s*(,?\s*please)?\s*[.!?]*\s*$"  # the phrase ends the message: "simplify that" yes, "simplify this rule" no
_META = re.compile(
    r"\b(summari[sz]e|recap|sum up)\b.*\b(conversation|chat|discussion|so far|we (discussed|talked))\b|"
    r"\b(summari[sz]e|recap|sum up) (that|this|it|everything)" + _END + "|"
    r"\bwhat (did|have) (you|i|we) (say|said|ask|asked|tell|told|discuss|discussed|mention|mentioned)\b|"
    r"\bwhat was (my|your|the) (first|last|previous|earlier|original) (question|answer|message|point)\b|"
    r"\b(repeat|rephrase|reword|simplify|shorten|translate|rewrite) (that|this|it|your (last )?answer)"
    r"( (into|in|to) \w+)?" + _END + "|"
    r"\b(say|explain|put) (that|this|it) (again|differently|another way|more simply|in other words)\b|"
    r"\b(say|tell me) (that|it) again\b|\bagain,? (but )?(shorter|briefer|simpler|longer|in (short|brief))\b|"
    r"\b(a )?(shorter|simpler|briefer|longer|more detailed) (version|answer)( of (that|it|this|your answer))?"
    + _END
    + "|"
    r"\b(the|that) (first|second|third|fourth|last|previous|next) (step|point|item|option|one) (you|that you) "
    r"(listed|mentioned|gave|said|described|suggested)\b|"
    r"\b(you|your) (just )?(said|listed|mentioned|wrote|suggested|answer(ed)?) (earlier|before|above|previously)\b",
    re.IGNORECASE,
)


def is_chit_chat(message: str) -> bool:
    """Only social phrases: at least one, and nothing of substance besides ("what did he do?" is not chit-chat)."""
    remainder, found = _SOCIAL.subn(" ", message)
    return found > 0 and not content_set(remainder)


def is_meta(message: str) -> bool:
    return bool(_META.search(message))


def route_by_rules(question: str, has_history: bool) -> Route | None:
    """The rules' verdict, or ``None`` when only the model can tell (a later turn that is neither chit-chat nor
    about the conversation)."""
    if is_chit_chat(question):
        return Route(TurnKind.CHIT_CHAT, "chit-chat: greetings, thanks or small talk")
    if has_history and is_meta(question):
        return Route(TurnKind.META, "about the conversation itself: answered from the history")
    if not has_history:
        return Route(TurnKind.NEW_QUERY, "first turn")
    return None


def route_by_standalone_test(question: str) -> Route:
    """For a later turn the rules left undecided: a new query if it stands alone, else a follow-up."""
    if looks_standalone(question):
        return Route(TurnKind.NEW_QUERY, "stands alone")
    return Route(TurnKind.FOLLOW_UP, "refers back to the conversation")


def route_by_analysis(kind: TurnKind) -> Route:
    """The route a model's structured analysis decided."""
    return Route(kind, "model analysis", "model")


def route_without_model(question: str, has_history: bool) -> Route:
    """The rules, completed by the standalone test: what a turn gets when there is no model analysis."""
    return route_by_rules(question, has_history) or route_by_standalone_test(question)


def history_covers(question: str, history_texts: list[str]) -> bool:
    """Every content word of the message already occurs in the conversation: the precondition for believing a
    model that says the conversation holds the answer (a message with new words needs the documents)."""
    asked = content_set(question)
    seen: set[str] = set()
    for text in history_texts:
        seen |= content_set(text)
    return bool(asked) and asked <= seen
