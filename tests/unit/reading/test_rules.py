"""The rules that read the user's words, by example: one table, one row per (message, what the Reading says).

Each row names a field of :class:`~anaphora.reading.message.Reading` and the value the rules must give. A rule that
changes shows here first; the labelled set of turns about the conversation (``tests/data/conversation_intents.jsonl``,
``bench/intents.py``) measures the router on phrasings with a held-out part."""

from __future__ import annotations

import pytest

from anaphora.reading.message import read

pytestmark = pytest.mark.unit

EXAMPLES = [
    # chit-chat
    ("thanks!", "chit_chat", True),
    ("hey there", "chit_chat", True),
    ("thanks, and on ARM?", "chit_chat", False),
    # about the conversation
    ("say that again, shorter", "about_conversation", True),
    ("recap everything so far in two lines", "about_conversation", True),
    ("what was the first command you gave me?", "about_conversation", True),
    ("which settings did you mention? names only", "about_conversation", True),
    ("how do I shorten the retention window?", "about_conversation", False),
    ("summarize the upgrade guide", "about_conversation", False),
    ("what was the default port in v2?", "about_conversation", False),
    ("do you need root to install it?", "about_conversation", False),
    # about the user
    ("which version did I say we run?", "asks_what_user_said", True),
    ("am I on v3?", "asks_what_user_said", True),
    ("what architecture are my nodes?", "asks_what_user_said", True),
    ("what are my options?", "asks_what_user_said", False),
    # what the assistant holds about the user (our own phrasings)
    ("what queue and release do you have on file for us?", "asks_what_user_said", True),
    ("do you remember which region we deploy to?", "asks_what_user_said", True),
    ("what do you know about our cluster?", "asks_what_user_said", True),
    ("is the audit log kept on file storage?", "asks_what_user_said", False),
    ("do you remember the retention setting you mentioned?", "asks_what_user_said", False),
    ("do you have an example config for our ruler?", "asks_what_user_said", False),
    ("is the setting available for my version?", "about_user", True),
    ("how do I install it?", "about_user", False),
    ("which version are we on, and does it support OTLP?", "asks_only_what_user_said", False),
    ("which celery release are we on?", "asks_only_what_user_said", True),
    ("and which release are we on?", "asks_only_what_user_said", True),  # a leading "and" continues, asks one thing
    ("and which node version does our repo pin?", "asks_what_user_said", True),
    ("the hostname of our server, did I ever give you that?", "asks_what_user_said", True),
    ("which node version does the installer need?", "asks_what_user_said", False),
    ("what do we have to change to move to v3?", "asks_what_user_said", False),  # an obligation, not a possession
    # statements of the user's setup
    ("fyi all our docker hosts are ARM64", "states_setup", True),
    ("we run traefik v3 in docker compose", "states_setup", True),
    ("we run traefik v3, how do I enable the dashboard?", "states_setup", False),
    # the topic
    ("unrelated: can traefik load-balance UDP?", "shifts_topic", True),
    ("different question: how do I rotate logs?", "shifts_topic", True),
    ("back to postgres for a sec: is TLS required?", "returns_to_topic", True),
    ("and on ARM?", "continues", True),
    ("does any of what you told me change?", "continues", True),
    ("does the installer need root if you used sudo?", "continues", False),
    ("what about the other one?", "refers_back", True),
    ("how do I enable TLS on the HTTP output?", "refers_back", False),
    # the past, procedures, amounts
    ("which version did I run before?", "about_past", True),
    ("which version do I run?", "about_past", False),
    ("how do I turn on retention?", "asks_how", True),
    ("does it support TLS?", "asks_how", False),
    ("how long until it's gone?", "asks_amount", True),
    ("which limit applies?", "asks_amount", False),
]


@pytest.mark.parametrize(("message", "field", "expected"), EXAMPLES)
def test_the_rules_read_each_example_as_written(message: str, field: str, expected: bool) -> None:
    assert getattr(read(message), field) is expected, f"{message!r}: {field} should be {expected}"


def test_a_version_is_not_a_name_of_its_own() -> None:
    """The coverage check's names: "v3" is a version of what the docs cover; "WSL2" and "KEDA" are subjects."""
    from anaphora.reading.coverage import written_as_names

    assert written_as_names("what do we have to change to move to v3?") == set()
    assert written_as_names("would running it inside WSL2 work? is there a KEDA scaler?") == {"wsl2", "keda"}
