"""A request whose form asks for what was said ("as a checklist", "nothing else", "came up today") but whose words
name a topic is about the conversation only when the conversation said that topic; a question put to the documents
stays one. The phrasings are written for this test, not taken from a benchmark."""

from __future__ import annotations

import asyncio

import pytest

from anaphora.pipeline.stages import Router
from anaphora.pipeline.state import TurnRequest, TurnState
from anaphora.reading.intents import Intent
from anaphora.testing.stages import run_stage
from anaphora.types import Message

pytestmark = pytest.mark.unit

BACKUPS = [
    Message(role="user", content="how do I back up the database every night?"),
    Message(
        role="assistant",
        content="Schedule `pg_dump` with cron: `0 2 * * * pg_dump -Fc shop > /backups/shop.dump`. Keep the dumps "
        "for 14 days with `BACKUP_RETENTION_DAYS=14`, and set `BACKUP_BUCKET` to copy them off the host.",
    ),
]


def route(message: str, history: list[Message]) -> TurnState:
    router = Router(skip_gate=True)
    state = TurnState(question=message, request=TurnRequest(question=message), history=tuple(history))
    return asyncio.run(run_stage(router, state))[0]


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        ("the backup variables, names only", Intent.POINT_BACK),
        ("just the cron line for the nightly dump, nothing else", Intent.POINT_BACK),
        ("which environment variables came up for the backups?", Intent.POINT_BACK),
        ("in one line: how were the dumps kept off the host?", Intent.SHORTEN),
        ("the retention setting for the dumps again, bare name", Intent.POINT_BACK),
        # where the summary goes is not what it is about
        ("recap the backup setup for my runbook, 40 words max", Intent.RECAP),
        ("sum up the nightly dumps for our wiki", Intent.RECAP),
        # a word of an identifier names it: `BACKUP_RETENTION_DAYS` was said, "retention" points at it
        ("what was the retention variable again?", Intent.POINT_BACK),
    ],
)
def test_a_shaped_request_about_what_was_said_is_answered_from_the_conversation(message: str, intent: Intent) -> None:
    state = route(message, BACKUPS)
    assert state.route.kind.value == "meta", state.route
    assert state.reading.request is not None and state.reading.request.intent is intent
    assert not state.reading.request.tentative


@pytest.mark.parametrize(
    "message",
    [
        "which environment variables does the replication setup need, names only",  # never said: the documents
        "can I get the restore steps as a checklist?",  # a question put to the documents
        "back to the dumps from the start: does pg_dump lock the tables while it runs?",
        "what if there isn't a single bucket I can copy them to?",  # "an" inside "can" is no length
        "how do I keep the dumps for 30 days instead?",
    ],
)
def test_a_shaped_question_with_a_new_topic_goes_to_the_documents(message: str) -> None:
    state = route(message, BACKUPS)
    assert state.route.kind.value != "meta", (state.route, state.reading.request_if_said)


def test_the_same_shaped_request_searches_when_the_conversation_never_said_its_topic() -> None:
    other = [
        Message(role="user", content="how do I rotate the TLS certificates?"),
        Message(role="assistant", content="Run `certctl rotate`."),
    ]
    assert route("the backup variables, names only", other).route.kind.value != "meta"
    assert route("the backup variables, names only", BACKUPS).route.kind.value == "meta"


def test_a_recap_of_the_thread_is_answered_whatever_it_is_for() -> None:
    """A recap asks of the whole conversation: what it is for ("for the ticket") names no topic to look up."""
    state = route("tl;dr of this thread in 40 words max, it's going in the ticket", BACKUPS)
    assert state.route.kind.value == "meta"
    assert state.reading.request.intent is Intent.RECAP
