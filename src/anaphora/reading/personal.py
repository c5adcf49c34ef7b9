"""Turns about the user themselves, read without a model: questions about what the user said or runs ("which
version did I say I run?", "what architecture are my nodes?"), statements of the user's setup ("fyi: we run
Traefik v3 on a VM"), and a fact said back to the user in the second person.

A question about the user is answered from the user's current facts first (the recall stage shows the relevant
ones even below the generic threshold, and the answer leads with them); a statement is acknowledged, not answered
from the documents. Both are read by patterns on the user's words, like the facts themselves
(:mod:`anaphora.reading.extract`); "how do I ..." asks about the documents, not about the user.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from anaphora.reading.extract import ExtractedFact, extract_entities
from anaphora.text import content_set, content_union

if TYPE_CHECKING:
    from anaphora.reading.message import Reading

# a second question joined to the first ("..., and does it support OTLP?")
_SECOND_QUESTION = re.compile(
    # (a message that opens with "and" continues the conversation: "and which release are we on?" asks one thing)
    r"(?:(?<=\S)\s+(?:and|but)|[,;])\s+(?:is|are|does|do|can|could|will|would|should|how|what|which|where)\b",
    re.I,
)
# "did I say", "I told you", "what do I run", "am I on": the question asks what the user said or has
_ASKS_WHAT_USER_SAID = re.compile(
    r"\b(?:did|have|had) (?:i|we)( ever)? (?:say|said|tell|told|mention|state|write|give|gave|given|share|shared)\b|"
    # the version a thing of the user's holds to: "which node version does our repo pin?"
    r"\b(?:what|which)\b[^?]{0,30}\b(?:version|release)s?\b[^?]{0,20}\b(?:does|do|is|are) (?:our|my) \w+"
    r"(?: \w+)? (?:pin|pins|run|runs|use|uses|target|targets|have|has|on)\b|"
    r"\b(?:i|we) (?:said|told you|mentioned|stated)\b|"
    r"\b(?:what|which)\b[^?]{0,40}\b(?:do|did|am|are|was|were) (?:i|we) (?:run|use|have(?! to\b)|own|prefer|on)\b|"
    r"\b(?:am i|are we) (?:running|using|on)\b|"
    # what the assistant holds about the user: "what do you have on file for us?", "do you remember which we run?"
    r"\byou (?:have|got) on file\b|\bon file (?:for|about) (?:me|us)\b|"
    r"\b(?:do|did) you (?:remember|recall)\b[^?]{0,40}\b(?:i|we|me|us|my|our)\b|"
    r"\bwhat do you know about (?:me|us|my|our)\b|"
    # the kind of a thing of the user's, asked of it alone: "what architecture are my nodes?", "which version is
    # our cluster on?" (not "what are my options?", "what ports are my services exposed on?")
    r"^\s*(?:what|which)\s+(?:\w+\s+){1,2}(?:is|are)\s+(?:my|our)\s+\w+(?:\s+(?:on|running))?\s*\?*\s*$",
    re.I,
)
_POSSESSIVE = re.compile(r"\b(?:my|our|mine|ours)\b", re.I)  # "my version", "our cluster"
# statements: the user says something about themselves or their setup and asks nothing
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|we|we're|we've|our|my|us)\b", re.I)
_MARKER = re.compile(
    r"^\s*(?:fyi|fwiw|context|heads up|btw|by the way|setup|for context|note|for the record|for reference|"
    r"(?:some |a bit of |for )?background|just so you know|keep in mind|bear in mind|info)\b",
    re.I,
)
_MARKER_WORDS = re.compile(_MARKER.pattern + r"[\s,:;-]*", re.I)  # a marker and what separates it from the rest
# a short label before what it introduces: "the setup: ...", "info for later: ...", "quick note - ..."
_LABEL = re.compile(r"^\s*(?:[\w'’]+[ -]){0,3}[\w'’]+\s*(?::|\s[-–—])\s+")
_ASKING_LABEL = re.compile(r"\b(?:problem|question|issue|bug|error|q)\b", re.I)  # "different problem: ..."
_REQUIRES = re.compile(r"\b(?:should|must|needs? to|has to|have to|ought to)\b", re.I)
_SAYS_WHAT_IS = re.compile(r"\b(?:is|are|was|were|has|have)\b", re.I)
_ASKS = re.compile(
    r"\?|^\s*(?:how|what|which|why|where|when|who|can|could|would|should|is|are|does|do|did|will|please|show|tell|"
    r"explain|give|help|list|write|make|set|configure|fix)\b|"
    # a later clause that asks, typed without a question mark: "we run 3 replicas, can all of them do it"
    r"[,;:.]\s*(?:how|what|can|could|would|should|is|are|does|do|did|will)\b|"
    r"\b(?:i|we)(?: need| want| would like|'d like| am trying|'m trying| are trying|'re trying| am looking|"
    r"'m looking| have to| must| wonder)\b",
    re.I,
)
_TROUBLE = re.compile(
    r"\b(?:error|errors|fail(?:s|ed|ing)?|broken|not working|doesn't work|won't|can't|cannot|crash(?:es|ed)?|"
    r"issue|problem|stuck|oom|timeout|keeps)\b",
    re.I,
)
_VERSION_WORDS = frozenset(content_set("version versions release releases"))
_VERSION = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+|(?<![\w.])v\d+\b", re.I)
_NOT_EVIDENCE = frozenset(content_set("user said say tell told mention"))


# the words a question about the user asks with, not about what: "which version did I say we run now?" (the verbs
# of "what do I run / use / have", as in _ASKS_WHAT_USER_SAID)
ASKING_WORDS = (
    _NOT_EVIDENCE
    | _VERSION_WORDS
    | content_set(
        "now current currently run use have own running runs using used has had setup stack ever again remind exactly "
        "give gave mentioned"
    )
)


def facts_answer(question: Reading, facts: Sequence[str]) -> bool:
    """Whether the user's facts say everything the question asks: each of its content words, but for the words it
    asks with, is in them ("which loki version did I say we run?" against "the user runs loki 3.2 on ARM64"), or
    it asks only what the user said or has ("which platform did I say we run traefik on?"), which no document can
    tell. Then the documents have nothing to add; "is the setting you described available for my version?", or
    "which version did I say I run, and does it support OTLP?", still asks them."""
    if not facts:
        return False
    if question.asks_only_what_user_said:
        return True
    known = content_union(facts)
    return question.words - ASKING_WORDS <= known


def second_question(question: str) -> bool:
    """A second question joined to the first ("which version do we run, and does it support OTLP?"): then the
    documents still have something to answer."""
    return bool(_SECOND_QUESTION.search(question))


def states_again(message: str, value: str) -> bool:
    """Whether ``message`` itself says a fact's ``value`` ("running traefik v3 in docker compose. how do i ...?"):
    the user is saying it now, so it is neither said back nor added to the query a second time."""
    return bool(value) and value.lower() in message.lower()


def possessive(question: str) -> bool:
    """The question names something of the user's ("my version", "our cluster"): with :func:`asks_what_user_said`,
    a question about the user (``Reading.about_user``), not only about the documents."""
    return bool(_POSSESSIVE.search(question))


def asks_what_user_said(question: str) -> bool:
    """Whether the question asks what the user said or has ("which version did I say I run?", "am I on v3?"):
    what the user stated answers it, while "our IdP only speaks SAML: can traefik do SAML?" asks the documents."""
    return bool(_ASKS_WHAT_USER_SAID.search(question))


def states_about_user(message: str, facts: list[ExtractedFact]) -> bool:
    """A statement of the user's setup or situation that asks nothing (and reports no trouble, which wants help):
    facts the rules found, or first-person words under a marker like "fyi" or "context"."""
    if _ASKS.search(message) or _TROUBLE.search(message):
        return False
    if facts or (_MARKER.match(message) and _FIRST_PERSON.search(message)):
        return True
    label = _LABEL.match(message)
    if label is None or _ASKING_LABEL.search(label.group(0)):
        return False
    said = message[label.end() :]
    if _REQUIRES.search(said):  # "separately: only our office range should reach /admin" wants it done
        return False
    return bool(_FIRST_PERSON.search(said) or _SAYS_WHAT_IS.search(said) or _MARKER.match(message))


def without_label(statement: str) -> str:
    """A statement without the label or marker it opens with ("before we start: our workers run on Kubernetes" ->
    "our workers run on Kubernetes"): what it says of the user, to search with and to say back."""
    rest = statement.strip()
    for _ in range(2):  # a marker, then a label: "some background before I ask anything: ..."
        opening = _LABEL.match(rest) or _MARKER_WORDS.match(rest)
        if opening is None or not rest[opening.end() :].strip():
            break
        rest = rest[opening.end() :].strip()
    return rest


REPEATS = 0.7  # the share of an earlier message's content words the question has when it asks the same again


def evidence_for(question: Reading, episode: Reading, said_here: Sequence[str] = ()) -> bool:
    """Whether an episode (what the user said in an earlier turn) can be shown as evidence for ``question``: not
    when the user asked it (an earlier question is evidence of nothing but having asked, so it is shown only when the
    question is about what the user said), and, unless it states the user's setup, not when it says what the
    question, or a message of this conversation the prompt already has (``said_here``), says: the same problem
    reported again would be answered with itself."""
    if _ASKS.search(episode.text) and not question.about_user:
        return False
    if episode.states_setup:
        return True  # a statement of the user's setup is evidence, whatever the question repeats of it
    said = episode.words
    repeated = (question.words, *(content_set(m) for m in said_here))
    return not said or all(len(said & other) / len(said) < REPEATS for other in repeated)


def fact_answers(question: str, fact_text: str, fact_value: str, generic: Collection[str] = ()) -> bool:
    """Whether a fact is relevant to a question about the user: they share a word that is not only a name both
    mention, nor a word the documents use everywhere (``generic``: the docs site's own product name), so a shared
    product name alone is not relevance; or the question asks for a version and the fact has one, of what the
    question names (:func:`versions_of`)."""
    asked, stated = content_set(question), content_set(fact_text)
    names = content_set(" ".join([*(name for name, _ in extract_entities(question)), *generic]))
    shared = (asked & stated) - _NOT_EVIDENCE - names
    if not versions_of(question) <= stated:
        return False  # "which node version does our repo pin?" is not answered by what the repo says of Python
    return bool(shared) or (bool(asked & _VERSION_WORDS) and bool(_VERSION.search(fact_value)))


_VERSION_OF = re.compile(r"\b([a-z][\w.+-]*)\s+(?:version|release)s?\b", re.I)
_NO_PRODUCT = content_set(
    "which what the my our your its their this that a an same latest new newer older old current exact minimum "
    "supported stable major minor patch"
)


def versions_of(question: str) -> frozenset[str]:
    """What the question asks the version of, by the word before "version" / "release" ("which celery release are
    we on?": celery), none for "my version": a fact's version answers only a question about its own thing."""
    named = (content_set(m.group(1)) for m in _VERSION_OF.finditer(question))
    return frozenset().union(*named) - _NO_PRODUCT


def on_topic(asked: frozenset[str], stated: frozenset[str]) -> bool:
    """A fact close in meaning answers a question only if the question names nothing the fact does not: "and the
    hostname of our server, did I give you that?" is not answered by the user's operating system."""
    topic = asked - ASKING_WORDS
    return not topic or bool(topic & stated)


_SECOND_PERSON = (
    (r"^the user's ", "your "),
    (r"^the user (?:is on|are on)\b", "you are on"),
    (r"^the user is\b", "you are"),
    (r"^the user has\b", "you have"),
    (r"^the user no longer uses\b", "you no longer use"),
    (r"^the user does not\b", "you do not"),
    (r"^the user (\w+?)e?s\b", None),  # runs -> run, uses -> use, prefers -> prefer, lives in -> live in
    (r"^the user\b", "you"),
)


def second_person(fact_text: str) -> str:
    """A fact's text as said to the user: "the user runs X" -> "You run X"."""
    text = fact_text.strip()
    for pattern, replacement in _SECOND_PERSON:
        match = re.match(pattern, text, re.I)
        if match is None:
            continue
        if replacement is None:
            verb = text[len("the user ") : match.end()]
            replacement = "you " + (verb[:-1] if verb.endswith("s") else verb)
        text = replacement + text[match.end() :]
        break
    return text[:1].upper() + text[1:]


def said_to_user(memory_text: str) -> str:
    """A memory said back to the user as one sentence: a fact in the second person ("You run X."), a statement no
    fact rule read in the user's own words, without its label ('You said: "we deploy on Debian, with Python
    3.12".', not "Fyi we deploy ...")."""
    if _FACT_TEXT.match(memory_text):
        return second_person(memory_text).rstrip(".") + "."
    return f'You said: "{without_label(memory_text).rstrip(".")}".'


_FACT_TEXT = re.compile(r"^\s*the user\b", re.I)  # how every fact is written (reading.extract)


def as_you_said(facts: Sequence[str] = (), words: str = "") -> str:
    """The line a quoted answer opens with when it used what the user's previous message stated ("As you said, your
    docker hosts are ARM64."): the quote cannot adapt the documents' words to the user's setup, so it says which of
    the user's words it took into account. ``facts``: the statement's facts as said to the user; ``words``: a
    statement no fact rule reads, quoted as the user wrote it."""
    if facts:
        return f"{AS_YOU_SAID}, " + "; ".join(_lower_first(s).rstrip(".") for s in facts) + "."
    return f'{AS_YOU_SAID}: "{words.strip()}"' if words.strip() else ""


def bears_on(said_back: str, question: Reading, answer: str) -> bool:
    """Whether what the user just stated (the line that says it back) bears on this turn: the question points back
    at it ("will a worker even run on this thing?") or speaks of the user's own ("which mode should we go with?"; "how
    do I ..." is how anyone asks), or the answer names something it names (a word that is not one everyone states
    with: "use", "run", "have"). "We use pytest btw", then "how do I make a custom 404 page?": none of them."""
    if question.refers_back or _OWN.search(question.text):
        return True
    stated = content_set(said_back.removeprefix(AS_YOU_SAID)) - ASKING_WORDS
    return bool(stated & content_set(answer))


_OWN = re.compile(r"\b(?:we|we're|we've|we'd|us|our|ours|my|mine)\b", re.I)  # not "I": "how do I" asks for anyone


AS_YOU_SAID = "As you said"  # how that line begins: what the assistant said of the conversation leaves it out


ACKNOWLEDGED = "Noted"  # how every acknowledgement begins: recaps of the conversation leave them out


def acknowledgement(facts: list[ExtractedFact], *, remembered: bool) -> str:
    """The short reply to a statement: what was understood, and whether it is kept."""
    kept = " I'll remember that." if remembered else " (This chat is not remembered.)"
    if not facts:
        return f"{ACKNOWLEDGED}." + kept
    said = "; ".join(_lower_first(second_person(f.text)) for f in facts[:3])
    return f"{ACKNOWLEDGED}: {said}.{kept}"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
