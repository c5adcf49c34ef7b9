"""Turn routing rules: chit-chat and questions about the conversation skip retrieval; turn 1 is never a follow-up."""

from __future__ import annotations

import pytest

from anaphora.reading.message import read
from anaphora.reading.route import Route, TurnKind
from anaphora.reading.route import route_by_rules as _route_by_rules
from anaphora.reading.route import route_turn as _route_turn


def is_chit_chat(message: str) -> bool:
    return read(message).chit_chat


def is_meta(message: str) -> bool:
    return read(message).about_conversation


def route_by_rules(message: str, has_history: bool):
    return _route_by_rules(read(message), has_history)


def route_turn(message: str, has_history: bool):
    return _route_turn(read(message), has_history)


pytestmark = pytest.mark.unit

CHIT_CHAT = [
    "hi",
    "Hello!",
    "hey there",
    "Good morning",
    "thanks",
    "Thank you so much!",
    "thx",
    "cheers",
    "great, thanks!",
    "that was very helpful",
    "ok",
    "OK",
    "okay",
    "got it",
    "bye",
    "Goodbye!",
    "see you",
    "have a nice day",
    "who are you?",
    "Who are you",
    "what can you do?",
    "how are you?",
    # informal thanks and acknowledgements (our own list, not a dev set's)
    "thanks a million",
    "oh nice, thank u",
    "gotcha",
    "i see, fair enough",
    "ahh ok, nice to know",
    "roger that, will do",
]

META = [
    "summarize our conversation",
    "Summarise our conversation so far",
    "can you recap what we discussed?",
    "what did you say earlier?",
    "what was my first question?",
    "what was your last answer?",
    "say that again, shorter",
    "Say that again, shorter",
    "can you repeat that",
    "can you repeat that?",
    "rephrase your answer",
    "put it another way",
    "what was the second step you listed?",
    "what was your first snippet?",
]

# social words around a real question do not make it chit-chat
NOT_CHIT_CHAT = [
    "thanks, and what about ARM?",
    "Great, how do I enable TLS?",
    "hello, how do I upgrade Kestrel?",
    "ok so how do I rotate the TLS keys?",
    "sure, what about Windows?",
    "How do I install Kestrel on Kubernetes?",
    "And on ARM?",
    "gotcha, and on ARM?",
    "i see. what about the retention window?",
    "oh, the TLS port",
]


@pytest.mark.parametrize("message", CHIT_CHAT)
def test_chit_chat_is_detected(message: str) -> None:
    assert is_chit_chat(message)
    assert not is_meta(message)


@pytest.mark.parametrize("message", CHIT_CHAT)
@pytest.mark.parametrize("has_history", [False, True])
def test_chit_chat_routes_without_retrieval_on_any_turn(message: str, has_history: bool) -> None:
    route = route_by_rules(message, has_history)
    assert route is not None
    assert route.kind is TurnKind.CHIT_CHAT
    assert route.needs_retrieval is False
    assert route.reason
    assert route_turn(message, has_history) == route


@pytest.mark.parametrize("message", NOT_CHIT_CHAT)
def test_social_words_around_a_question_are_not_chit_chat(message: str) -> None:
    assert not is_chit_chat(message)
    assert not is_meta(message)
    for has_history in (False, True):
        route = route_turn(message, has_history)
        assert route.kind not in (TurnKind.CHIT_CHAT, TurnKind.META)
        assert route.needs_retrieval


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("thanks, and what about ARM?", TurnKind.FOLLOW_UP),
        ("Great, how do I enable TLS?", TurnKind.NEW_QUERY),
        ("sure, what about Windows?", TurnKind.FOLLOW_UP),
        ("ok so how do I rotate the TLS keys?", TurnKind.NEW_QUERY),
    ],
)
def test_social_prefix_then_question_routes_on_the_question(message: str, kind: TurnKind) -> None:
    assert route_by_rules(message, True) is None  # the rules leave it to the standalone test
    assert route_turn(message, True).kind is kind


@pytest.mark.parametrize("message", META)
def test_meta_is_detected(message: str) -> None:
    assert is_meta(message)
    assert not is_chit_chat(message)


@pytest.mark.parametrize("message", META)
def test_meta_with_history_skips_retrieval(message: str) -> None:
    route = route_by_rules(message, True)
    assert route == Route(TurnKind.META, route.reason)
    assert "conversation" in route.reason
    assert route_turn(message, True) == route


@pytest.mark.parametrize("message", META)
def test_meta_looking_message_on_turn_one_is_a_new_query(message: str) -> None:
    # there is no conversation to talk about yet: treat it as a question for the documents
    route = route_by_rules(message, False)
    assert route is not None
    assert route.kind is TurnKind.NEW_QUERY
    assert route.needs_retrieval
    assert route.reason == "first turn"


@pytest.mark.parametrize(
    "message",
    [
        "And on ARM?",
        "and on ARM?",
        "Does it support ARM?",
        "What about memory limits?",
        "thanks, and what about ARM?",
        "How do I install Kestrel on Kubernetes?",
        "Which one?",
    ],
)
def test_turn_one_is_never_a_follow_up(message: str) -> None:
    for route in (route_by_rules(message, False), route_turn(message, False)):
        assert route is not None
        assert route.kind is TurnKind.NEW_QUERY
        assert route.needs_retrieval


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("How do I install Kestrel on Kubernetes?", TurnKind.NEW_QUERY),
        ("How do I enable TLS for the Kestrel API server?", TurnKind.NEW_QUERY),
        ("please explain the upgrade steps", TurnKind.NEW_QUERY),
        ("And on ARM?", TurnKind.FOLLOW_UP),
        ("and on ARM?", TurnKind.FOLLOW_UP),
        ("Does it support ARM?", TurnKind.FOLLOW_UP),  # pronoun
        ("What about memory limits?", TurnKind.FOLLOW_UP),  # continuation
        ("Tell me more", TurnKind.FOLLOW_UP),
        ("no, I meant on Windows", TurnKind.FOLLOW_UP),  # too short to name a topic
        ("okay and the ports?", TurnKind.FOLLOW_UP),
    ],
)
def test_later_turns_standalone_or_follow_up(message: str, kind: TurnKind) -> None:
    assert route_by_rules(message, True) is None
    route = route_turn(message, True)
    assert route.kind is kind
    assert route.needs_retrieval


@pytest.mark.parametrize(
    "message",
    [
        "we also need the admin dashboard behind a password",  # an addition to what was set up
        "how would I strip the header instead?",  # an alternative to what was said
        "does the helm chart handle upgrades as well?",
        "can the worker restart itself on a schedule too?",
        "the staging cluster doesn't run the gateway either.",
    ],
)
def test_a_message_that_adds_to_or_replaces_what_was_said_carries_on(message: str) -> None:
    """Complete questions that name their subject, each presupposing the conversation so far: searched alone,
    they lose the topic they add to ("i also need *.example.com" after asking for a Let's Encrypt certificate)."""
    assert route_turn(message, True).kind is TurnKind.FOLLOW_UP


@pytest.mark.parametrize(
    "message",
    [
        "why are there too many open files on the ingester?",  # "too" of degree
        "can I ship logs to either S3 or GCS from one agent?",  # "either ... or": a choice, no reference
    ],
)
def test_too_and_either_inside_a_clause_presuppose_nothing(message: str) -> None:
    assert route_turn(message, True).kind is TurnKind.NEW_QUERY


def test_empty_message_is_not_chit_chat() -> None:
    assert not is_chit_chat("")
    assert not is_chit_chat("   ")
    assert route_turn("", False).kind is TurnKind.NEW_QUERY


def test_turn_kinds_are_plain_strings() -> None:
    # the kinds go into metrics labels and the stored trace as they are
    assert TurnKind.CHIT_CHAT == "chit_chat"
    assert TurnKind.META == "meta"
    assert {k.value for k in TurnKind} == {"follow_up", "new_query", "chit_chat", "meta"}


# a message needs at least one social word to be chit-chat: function words alone are a follow-up
@pytest.mark.parametrize(
    "message", ["Why is that?", "What about them?", "And what about those?", "How so?", "What about it?"]
)
def test_function_word_follow_ups_are_not_chit_chat(message: str) -> None:
    assert not is_chit_chat(message)
    route = route_turn(message, True)
    assert route.kind is TurnKind.FOLLOW_UP
    assert route.needs_retrieval


@pytest.mark.parametrize(
    "message",
    [
        "Is there a shorter version of the install command?",
        "Can I simplify this configuration?",
        "How do I rewrite this rule in YAML?",
    ],
)
def test_document_questions_with_meta_words_still_retrieve(message: str) -> None:
    assert route_turn(message, True).needs_retrieval


@pytest.mark.parametrize(
    "message", ["is -u meant for unbuffered output?", "what is the flag -u called in the config file?"]
)
def test_a_flag_named_u_is_no_pointer_at_the_conversation(message: str) -> None:
    """ "u" stands for "you" ("did u mention ..."), but not in `-u`: a question about that flag asks the documents."""
    assert not is_meta(message)
