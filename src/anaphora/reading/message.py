"""One reading of a message: every rule that reads the user's words, applied once, into one value.

The router stage reads the turn's message (:func:`read`) into the turn state (``TurnState.reading``); the stages
after it declare ``reads = ("reading", ...)`` and use its fields instead of calling the rules again. Earlier messages
of the conversation are read the same way where a stage needs them (the topic of a follow-up): :func:`read` is
memoised by the text, so a message is read once however many stages ask about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from anaphora.reading.dates import asks_about_past
from anaphora.reading.extract import ExtractedFact, extract_facts
from anaphora.reading.focus import asks_amount, asks_how
from anaphora.reading.intents import ConversationRequest, is_chit_chat, points_at_answer, recognise
from anaphora.reading.personal import asks_what_user_said, possessive, second_question, states_about_user
from anaphora.reading.route import continuation, mentions_reference, returns_to_topic, shifts_topic
from anaphora.text import content_set


@dataclass(frozen=True, slots=True)
class Reading:
    """What a message says about itself, as the rules read it.

    ``request``: a request about the conversation or a social turn (:func:`~anaphora.reading.intents.recognise`),
    ``None`` when it asks the documents; ``request_if_said``: a request about the conversation only if the
    conversation said its topic (``tentative``; the router decides, with the history); ``chit_chat``: only social
    phrases; ``about_user``: asks about the user
    ("my version", "did I say"); ``asks_what_user_said``: asks what the user said or has, which only the user's own
    words answer (``asks_only_what_user_said``: and nothing else, no second question); ``facts``: what it states
    about the user's setup; ``states_setup``: a statement that asks nothing; ``shifts_topic`` /
    ``returns_to_topic``: says it leaves the topic, or goes back to an earlier one; ``continues``: carries on from
    the last turn ("and on ARM?", "what you told me"); ``refers_back``: points into the conversation (a
    continuation, a return, a pronoun); ``about_past``: asks what was true before (superseded facts answer it);
    ``asks_how`` / ``asks_amount``: asks for a procedure, or for an amount (:mod:`~anaphora.reading.focus`);
    ``words``: its stemmed content words."""

    text: str
    request: ConversationRequest | None
    request_if_said: ConversationRequest | None
    chit_chat: bool
    about_user: bool
    asks_what_user_said: bool
    asks_only_what_user_said: bool
    facts: tuple[ExtractedFact, ...]
    states_setup: bool
    shifts_topic: bool
    returns_to_topic: bool
    continues: bool
    refers_back: bool
    about_past: bool
    asks_how: bool
    asks_amount: bool
    words: frozenset[str]

    @property
    def about_conversation(self) -> bool:
        """A request about the conversation itself (shorten, repeat, point back, recap), not a social turn."""
        return self.request is not None and self.request.is_meta

    @property
    def looks_standalone(self) -> bool:
        """Names a topic by word count alone and does not point back (the corpus's terms are the query stage's)."""
        return not self.refers_back and len(self.words) >= 3


@lru_cache(maxsize=4096)
def read(message: str) -> Reading:
    """The message read by every rule, each applied once (memoised by the text: a :class:`Reading` is immutable)."""
    said = asks_what_user_said(message)
    facts = tuple(extract_facts(message))
    continues = continuation(message) or points_at_answer(message)
    returns = returns_to_topic(message)
    request = recognise(message)
    tentative = request is not None and request.tentative
    return Reading(
        text=message,
        request=None if tentative else request,
        request_if_said=request if tentative else None,
        chit_chat=is_chit_chat(message),
        about_user=said or possessive(message),
        asks_what_user_said=said,
        asks_only_what_user_said=said and not second_question(message),
        facts=facts,
        states_setup=states_about_user(message, list(facts)),
        shifts_topic=shifts_topic(message),
        returns_to_topic=returns,
        continues=continues,
        refers_back=continues or returns or mentions_reference(message),
        about_past=asks_about_past(message),
        asks_how=asks_how(message),
        asks_amount=asks_amount(message),
        words=frozenset(content_set(message)),
    )
