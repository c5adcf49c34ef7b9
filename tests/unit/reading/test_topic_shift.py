"""Topic changes the user announces: "unrelated: ..." stands alone, "back to postgres: ..." resumes that topic."""

from __future__ import annotations

import pytest

from anaphora.pipeline.rewrite import HistoryExpansion, topic_turns
from anaphora.reading.message import read
from anaphora.reading.route import Route, TurnKind, returns_to_topic, shifts_topic
from anaphora.reading.route import route_turn as _route_turn
from anaphora.types import Message

pytestmark = pytest.mark.unit


def route_turn(message: str, has_history: bool):
    return _route_turn(read(message), has_history)


def conversation(*user_turns: str) -> list[Message]:
    history = []
    for text in user_turns:
        history += [Message(role="user", content=text), Message(role="assistant", content="An answer.")]
    return history


POSTGRES = conversation(
    "can traefik route several postgres databases on one port based on the hostname?",
    "can it stay encrypted end to end instead of terminating it?",
    "unrelated, we also run a DNS server. can traefik load-balance UDP 53 to it?",
    "can i route those by domain name like with the postgres setup?",
)


@pytest.mark.parametrize(
    "message",
    [
        "unrelated: java stack traces get rejected with line_too_long",
        "Unrelated, we also run a DNS server. can it load-balance UDP?",
        "different problem: someone logged emails into those lines",
        "switching topics: how do i get p99 latency?",
        "separately: only our office range should reach /admin",
        "ok, new question: how do I rotate the token?",
        "Another thing - does it support ARM?",
        "on a different note, what about backups?",
    ],
)
def test_announced_topic_change(message: str) -> None:
    assert shifts_topic(message)
    assert route_turn(message, has_history=True).kind is TurnKind.NEW_QUERY
    assert HistoryExpansion().stands_alone(message)  # "those lines" points inside the message, not back


@pytest.mark.parametrize(
    "message",
    [
        "other than that, is it fine?",
        "a different approach would be nice",
        "separate the logs by tenant?",
        "Another option is to raise the limit",
        "new version out?",
        "and our MQTT broker: can traefik route by topic?",
        "other, cheaper ways to do it?",
        "new, faster ingest: how?",
    ],
)
def test_no_topic_change(message: str) -> None:
    assert not shifts_topic(message)
    assert not returns_to_topic(message)


@pytest.mark.parametrize(
    "message",
    ["back to postgres for a sec: do clients set anything?", "Going back to the tenant thing: one query?"],
)
def test_return_to_a_topic(message: str) -> None:
    assert returns_to_topic(message)
    assert not shifts_topic(message)
    assert route_turn(message, has_history=True) == Route(TurnKind.FOLLOW_UP, "goes back to an earlier topic")


def test_follow_up_after_a_topic_change_takes_no_words_from_before_it() -> None:
    turns = topic_turns("can i route those by domain name?", POSTGRES[:6])
    assert turns == [POSTGRES[4].content]
    expanded, _ = HistoryExpansion().expand("and by port?", POSTGRES[:6])
    assert "DNS" in expanded and "postgres" not in expanded


def test_return_resumes_the_topic_it_names() -> None:
    message = "back to postgres for a sec: is there anything our clients have to set?"
    assert topic_turns(message, POSTGRES) == [POSTGRES[0].content, POSTGRES[2].content]
    expanded, _ = HistoryExpansion().expand(message, POSTGRES)
    assert "encrypted" in expanded and "DNS" not in expanded and "UDP" not in expanded


def test_turns_after_a_return_carry_the_resumed_topic() -> None:
    history = [*POSTGRES, *conversation("back to postgres for a sec: do the clients set anything?")]
    assert topic_turns("and which sslmode then?", history) == [
        POSTGRES[0].content,
        POSTGRES[2].content,
        history[-2].content,
    ]


def test_announced_change_has_no_earlier_turns() -> None:
    assert topic_turns("unrelated: how do I rotate the token?", POSTGRES) == []


def test_without_announcements_the_whole_conversation_is_one_topic() -> None:
    history = conversation("How do I install Kestrel on Kubernetes?", "Which chart version?")
    assert topic_turns("and on ARM?", history) == ["How do I install Kestrel on Kubernetes?", "Which chart version?"]


def test_return_without_an_announced_change_resumes_the_turns_it_names() -> None:
    history = conversation(
        "curl gives me a 401 with no org id",
        "it's just our team on this loki, we don't need tenants",
        "does loki have a built-in password login?",
    )
    message = "going back to the tenant thing: could one query cover both teams?"
    assert topic_turns(message, history) == [history[2].content]


def test_turns_after_a_return_without_an_announced_change_carry_the_turns_it_named() -> None:
    """The same return is read the same way as the question and, later, as history: the turns after it expand
    with what it resumed, not with the whole conversation."""
    history = conversation(
        "curl gives me a 401 with no org id",
        "it's just our team on this loki, we don't need tenants",
        "does loki have a built-in password login?",
    )
    back = "going back to the tenant thing: could one query cover both teams?"
    resumed = topic_turns(back, history)
    later = topic_turns("and with a header?", [*history, *conversation(back)])
    assert later == [*resumed, back]
    assert history[4].content not in later  # the password-login turn it did not name
