"""HistoryExpansion and looks_standalone: the model-free history-aware query."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from anaphora.pipeline.rewrite import HistoryExpansion
from anaphora.reading.message import read
from anaphora.text import STOPWORDS
from anaphora.types import Message

pytestmark = pytest.mark.unit

HISTORY = [
    Message(role="user", content="How do I install Kestrel on Kubernetes?"),
    Message(role="assistant", content="Use the Helm chart kestrel/kestrel with tolerations."),
    Message(role="user", content="Which Helm chart version supports Kestrel?"),
    Message(role="assistant", content="Chart 2.8.0 ships Kestrel 3.4.1 with daemonsets."),
]


@pytest.mark.parametrize(
    "question",
    [
        "How do I install it?",  # pronoun
        "Does that work on Windows?",  # demonstrative
        "Can they run on ARM nodes in production?",  # pronoun, long enough otherwise
        "And on ARM?",  # continuation
        "and what about Windows servers today?",
        "What about memory limits?",
        "How about the disk buffer size?",
        "Tell me more",
        "Also for macOS laptops and desktops?",
        "does any of what you told me change for Kestrel agents?",  # points at what the assistant said
        "is the command you gave me for ARM nodes too?",
        "does your last answer hold for Windows servers?",
        "did u mention Windows servers at all?",  # one pattern for "what the assistant said" (intents and route)
        "remind me which port the Kestrel agent listens on",
        "Helm chart?",  # too short to name a topic
        "Why?",
        "ok",
    ],
)
def test_non_standalone(question: str) -> None:
    assert not read(question).looks_standalone


@pytest.mark.parametrize(
    "question",
    [
        "How do I install Kestrel with Helm on Kubernetes?",
        "What memory limit does the Kestrel agent need?",
        "Which Kestrel version supports ARM nodes?",
        "Android phones compatible with Kestrel agents",  # starts with "and" but not the word "and"
    ],
)
def test_standalone(question: str) -> None:
    assert read(question).looks_standalone


def test_existential_there_question_stands_alone() -> None:
    question = "Is there a memory limit for the Kestrel agent?"
    assert read(question).looks_standalone
    assert HistoryExpansion().expand(question, HISTORY) == (question, False)


def test_standalone_question_is_returned_unchanged() -> None:
    question = "What memory limit does the Kestrel agent need?"
    assert HistoryExpansion().expand(question, HISTORY) == (question, False)


def test_no_history_leaves_even_a_follow_up_unchanged() -> None:
    assert HistoryExpansion().expand("And on ARM?", []) == ("And on ARM?", False)


def test_expansion_adds_recent_user_words_most_recent_first() -> None:
    query, expanded = HistoryExpansion().expand("And on ARM?", HISTORY)
    assert expanded
    # the latest user turn's words come first, then the earlier turn's new words; Kestrel only once
    assert query == "And on ARM? Helm chart version supports Kestrel install Kubernetes"


def test_expansion_uses_user_turns_only_and_no_stopwords() -> None:
    query, _ = HistoryExpansion().expand("And on ARM?", HISTORY)
    added = query.removeprefix("And on ARM?").split()
    assert added
    for word in added:
        assert word.lower() not in STOPWORDS
    for assistant_only in ("tolerations", "daemonsets", "ships", "Use", "2.8.0"):
        assert assistant_only not in added
    assert "How" not in added and "Which" not in added and "I" not in added


def test_expansion_skips_words_already_in_the_question() -> None:
    query, expanded = HistoryExpansion().expand("And the Helm charts?", HISTORY)
    assert expanded
    added = query.removeprefix("And the Helm charts?").split()
    assert "Helm" not in added
    assert "chart" not in added  # same stem as "charts"
    assert added[:3] == ["version", "supports", "Kestrel"]


def test_expansion_is_capped_at_max_terms() -> None:
    query, expanded = HistoryExpansion(max_terms=2).expand("And on ARM?", HISTORY)
    assert expanded
    assert query == "And on ARM? Helm chart"


def test_expansion_looks_at_the_last_n_user_turns() -> None:
    query, _ = HistoryExpansion(turns=1).expand("And on ARM?", HISTORY)
    assert query == "And on ARM? Helm chart version supports Kestrel"
    assert "Kubernetes" not in query


def test_expansion_without_salient_history_words_is_unchanged() -> None:
    history = [Message(role="user", content="And how about it?"), Message(role="assistant", content="Sure.")]
    assert HistoryExpansion().expand("And on ARM?", history) == ("And on ARM?", False)


async def test_run_reports_source_and_status() -> None:
    stage = HistoryExpansion()
    first = await stage.run("And on ARM?", [])
    assert (first.query, first.source, first.status, first.model_calls) == ("And on ARM?", "question", "skipped", 0)
    follow = await stage.run("And on ARM?", HISTORY)
    assert follow.source == "expansion" and follow.status == "ok" and follow.query.startswith("And on ARM? Helm")
    alone = await stage.run("What memory limit does the Kestrel agent need?", HISTORY)
    assert alone.source == "question" and alone.status == "ok"
    assert alone.query == "What memory limit does the Kestrel agent need?"


def test_a_compound_history_word_is_keyed_by_its_first_word_under_every_hash_seed() -> None:
    """A hyphenated "log-rotation" is one candidate keyed by "log"; keying it by an arbitrary member of its word
    set made the expansion depend on PYTHONHASHSEED (it was dropped whenever "rotation" happened to come out first)."""
    script = (
        "from anaphora.pipeline.rewrite import HistoryExpansion\n"
        "from anaphora.types import Message\n"
        "h = [Message(role='user', content='How do I configure log-rotation for the agent?')]\n"
        "print(HistoryExpansion().candidates('and the rotation size?', h))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outputs) == 1
    assert "log-rotation" in outputs.pop()


def test_a_condition_on_what_the_user_did_does_not_point_at_the_answer() -> None:

    assert not read("does the installer need root if you used sudo?").continues
    assert read("does any of what you told me change?").continues


# --- a message that stands alone: the topic's words ride along --------------------------------------------------


def test_a_standalone_message_leads_with_the_topics_words_as_an_alternate() -> None:
    """A message can look standalone and carry the topic on: the message is the query, its expansion an alternate
    the fusion weighs against it."""
    question = "What memory limit does the Kestrel agent need?"
    plan = HistoryExpansion().plan(question, HISTORY)
    expanded, _ = HistoryExpansion().expand(question, HISTORY, alone=False)
    assert (plan.query, plan.source) == (question, "question")
    assert plan.queries == [question, expanded]
    assert expanded.startswith(question) and expanded != question


def test_no_topic_alternate_after_an_announced_change_of_topic_or_on_a_first_turn() -> None:
    assert HistoryExpansion().plan("unrelated: what memory limit does the agent need?", HISTORY).alternates == ()
    assert HistoryExpansion().plan("What memory limit does the Kestrel agent need?", []).alternates == ()


def test_the_users_statements_are_no_topic_for_the_alternate() -> None:
    """A statement of the user's setup is what the personal stage adds; as a topic it would pull the setup's
    pages into a question about something else."""
    history = [
        Message(role="user", content="fyi we run Kestrel as a plain binary on Graviton VMs"),
        Message(role="assistant", content="Noted: you run Kestrel as a plain binary on Graviton VMs."),
    ]
    question = "How do I put a password on the dashboard page?"
    assert HistoryExpansion().plan(question, history).alternates == ()
    asked = [*history, Message(role="user", content="Which Helm chart version supports Kestrel?")]
    (alternate,) = HistoryExpansion().plan(question, asked).alternates
    assert "Helm" in alternate and "Graviton" not in alternate


def test_a_statement_that_announces_a_new_topic_still_ends_the_old_one() -> None:
    """Statements leave the topic alternate, but a statement that also says the topic changes keeps its boundary:
    nothing from before it comes back."""
    history = [
        Message(role="user", content="How do I route Postgres read replicas through pgbouncer?"),
        Message(role="assistant", content="Use the pgbouncer routing rules."),
        Message(role="user", content="switching topics, we run everything on ARM64 hosts now"),
        Message(role="assistant", content="Noted."),
    ]
    alternate = HistoryExpansion().topic_alternate("What memory limit does the Kestrel agent need?", history)
    assert alternate is None or ("pgbouncer" not in alternate and "Postgres" not in alternate)


def test_a_question_typed_without_a_question_mark_is_a_topic_not_a_statement() -> None:
    history = [
        Message(role="user", content="our ingesters use the WAL on local disk, how do we scale them down safely"),
        Message(role="assistant", content="Flush them first."),
    ]
    alternate = HistoryExpansion().topic_alternate("What happens to unflushed chunks during shutdown?", history)
    assert alternate is not None and "WAL" in alternate


async def test_the_plan_says_the_topic_rides_along() -> None:
    plan = await HistoryExpansion().run("What memory limit does the Kestrel agent need?", HISTORY)
    assert plan.source == "question" and plan.detail == "stands alone; the topic's words ride along"
    assert plan.alternates


def test_a_message_that_gained_no_words_is_not_expanded_again_for_the_alternate() -> None:
    """A message that points back is expanded with the history; when that adds nothing, the topic alternate
    (the same turns, none a statement) would add nothing either, and is not computed."""
    calls: list[int] = []

    class Counting(HistoryExpansion):
        def expand(self, question, history, alone=None):  # type: ignore[override]
            calls.append(len(history))
            return super().expand(question, history, alone)

    history = [Message(role="user", content="hello there"), Message(role="assistant", content="Hi!")]
    plan = Counting().plan("does that work too?", history)
    assert (plan.query, plan.alternates, calls) == ("does that work too?", (), [2])
