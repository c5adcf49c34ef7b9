"""validate_rewrite and strip_preamble: table-driven accept / reject cases."""

from __future__ import annotations

import pytest

from anaphora.reading.rewrite_guard import MAX_WORDS, strip_preamble, validate_rewrite
from anaphora.types import Message

pytestmark = pytest.mark.unit

HISTORY = [
    Message(role="user", content="How do I install Kestrel on Kubernetes?"),
    Message(role="assistant", content="Install the Helm chart kestrel/kestrel, version 2.8.0, into its own namespace."),
]

# (question, history, rewrite)
ACCEPTED = [
    pytest.param(
        "How do I install Kestrel with Helm?", [], "How do I install Kestrel with Helm?", id="unchanged-no-history"
    ),
    pytest.param(
        "What memory limit does the Kestrel agent need?",
        HISTORY,
        "What memory limit does the Kestrel agent need?",
        id="unchanged-standalone-with-history",
    ),
    pytest.param("And on ARM?", HISTORY, "How do I install Kestrel on Kubernetes on ARM?", id="continuation"),
    pytest.param("How do I upgrade it?", HISTORY, "How do I upgrade Kestrel?", id="pronoun-replaced"),
    pytest.param("Which version?", HISTORY, "Which version of the Kestrel Helm chart?", id="topic-from-answer"),
    pytest.param("What about ARM?", HISTORY, "Tell me more about installing Kestrel on ARM", id="framing-tell-more"),
    pytest.param(
        "What about ARM?",
        HISTORY,
        "Explain the differences for Kestrel on ARM, with examples",
        id="framing-explain-differences-examples",
    ),
    pytest.param(
        "And the namespace?", HISTORY, "Please list the steps to get the Kestrel namespace", id="framing-steps"
    ),
    pytest.param(
        "Как установить Kestrel на ARM?", [], "Как установить Kestrel на ARM?", id="cyrillic-unchanged-same-script"
    ),
    pytest.param("Kestrel на ARM?", [], "Kestrel на ARM?", id="mixed-script-unchanged"),
    pytest.param("And on ARM?", HISTORY, "How to install Kestrel on ARM (Kubernetes)", id="no-question-mark-short"),
]


@pytest.mark.parametrize(("question", "history", "rewrite"), ACCEPTED)
def test_accepted(question: str, history: list[Message], rewrite: str) -> None:
    assert validate_rewrite(question, history, rewrite) == []


LONG = " ".join(f"kestrel{i}" for i in range(MAX_WORDS + 1))
REJECTED = [
    pytest.param("And on ARM?", "", "empty", id="empty"),
    pytest.param("And on ARM?", " \t ", "empty", id="blank"),
    pytest.param("And on ARM?", "How do I install Kestrel on ARM?\nOn Kubernetes?", "multi-line", id="multi-line"),
    pytest.param("And on ARM?", "Kestrel on ARM " + " ".join(["Kubernetes Helm chart namespace"] * 12), "too long"),
    pytest.param("And on ARM?", "Kestrel ARM " + "k" * 400, "too long", id="too-many-characters"),
    pytest.param("And on ARM?", "Yes, you can install it with Helm.", "answers instead of asking", id="yes"),
    pytest.param("And on ARM?", "Sure! Kestrel on ARM", "answers instead of asking", id="sure"),
    pytest.param("And on ARM?", "You can install Kestrel on ARM", "answers instead of asking", id="you-can"),
    pytest.param("And on ARM?", "Here is the query: Kestrel on ARM", "answers instead of asking", id="here-is"),
    pytest.param("And on ARM?", "I think Kestrel on ARM", "answers instead of asking", id="i-think"),
    pytest.param(
        "And on ARM?",
        "Kestrel on ARM. Install the chart. Kubernetes namespace.",
        "answers instead of asking",
        id="three-sentences",
    ),
    pytest.param(
        "Which version on ARM?",
        "Kestrel chart version 2.8.0 on ARM installs into its own namespace with Helm on Kubernetes and the "
        "version of the chart is the one to install",
        "answers instead of asking",
        id="statement-much-longer-than-question",
    ),
    pytest.param("And on ARM?", "arm arm arm arm", "loops", id="same-word-run"),
    pytest.param("And on ARM?", "Kestrel on ARM Kestrel on ARM Kestrel on ARM", "loops", id="trigram-loop"),
    pytest.param("And on ARM?", "How do I install Kestrel on Kubernetes?", "drops the user's words", id="drops"),
    pytest.param(
        "How do I configure buffers and outputs on ARM?",
        "How do I configure Kestrel?",
        "drops the user's words",
        id="drops-most-words",
    ),
    pytest.param(
        "And on ARM?",
        "How do I install Kestrel on ARM with Terraform?",
        "introduces words from nowhere (terraform)",
        id="invented-entity",
    ),
    pytest.param("hello", "What is the capital of France?", "introduces words from nowhere", id="invented-question"),
    pytest.param("And on ARM?", "Как установить Kestrel на ARM?", "switched language", id="english-to-cyrillic"),
    pytest.param("Как установить Kestrel на ARM?", "How to install Kestrel on ARM?", "switched language", id="ru-en"),
    pytest.param("And on ARM?", "在ARM架构的服务器上如何安装和配置Kestrel", "switched language", id="english-to-cjk"),
]


@pytest.mark.parametrize(("question", "rewrite", "reason"), REJECTED)
def test_rejected(question: str, rewrite: str, reason: str) -> None:
    reasons = validate_rewrite(question, HISTORY, rewrite)
    assert reasons, "expected a rejection"
    assert any(r.startswith(reason) for r in reasons), reasons


def test_empty_is_the_only_reason_for_an_empty_rewrite() -> None:
    assert validate_rewrite("And on ARM?", HISTORY, "") == ["empty"]


def test_invented_words_are_named() -> None:
    reasons = validate_rewrite("And on ARM?", HISTORY, "Kestrel on ARM with Terraform and Ansible")
    invented = [r for r in reasons if r.startswith("introduces words from nowhere")]
    assert invented == ["introduces words from nowhere (ansibl, terraform)"]


def test_words_from_the_assistant_turns_count_as_known() -> None:
    # "namespace" and "chart" only appear in the assistant's answer
    assert validate_rewrite("And on ARM?", HISTORY, "Kestrel chart namespace on ARM") == []
    assert validate_rewrite("And on ARM?", [], "Kestrel chart namespace on ARM") != []


def test_long_question_allows_a_proportionally_long_rewrite() -> None:
    question = " ".join(f"kestrel{i}" for i in range(20)) + "?"
    assert "too long" not in validate_rewrite(question, [], question)
    assert len(question.split()) * 3 > MAX_WORDS  # the limit grows with the question


@pytest.mark.parametrize(
    "question",
    [
        pytest.param("Node affinity rules for the Kestrel agent pods?", id="Node"),
        pytest.param("Nothing shows up in the Kestrel logs after installing, why?", id="Nothing"),
        pytest.param("Yesterday Kestrel stopped shipping logs; what changed in 3.4?", id="Yesterday"),
        pytest.param("Surely the Kestrel chart supports ARM nodes?", id="Surely"),
    ],
)
def test_unchanged_question_starting_with_an_opener_prefix_is_accepted(question: str) -> None:
    assert validate_rewrite(question, HISTORY, question) == []


def test_unchanged_first_person_question_is_accepted() -> None:
    question = "I upgraded Kestrel to 3.4, how do I roll back the Helm release?"
    assert validate_rewrite(question, [], question) == []


# --- strip_preamble ---------------------------------------------------------------------------------------------

Q = "How do I install Kestrel on ARM?"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (Q, Q),
        (f"Standalone question: {Q}", Q),
        (f"standalone query:{Q}", Q),
        (f"The standalone question: {Q}", Q),
        (f"Rewritten query - {Q}", Q),
        (f"Reformulated question – {Q}", Q),
        (f"Search query: {Q}", Q),
        (f"Final query: {Q}", Q),
        (f"Query: {Q}", Q),
        (f"Question: {Q}", Q),
        (f"Rewrite: {Q}", Q),
        (f"Output: {Q}", Q),
        (f'Standalone question: "{Q}"', Q),
        (f"“{Q}”", Q),
        (f"‘{Q}’", Q),
        (f"`{Q}`", Q),
        (f"   {Q}   ", Q),
        (f"\n\n{Q}\n", Q),
        ("Questions about Kestrel on ARM", "Questions about Kestrel on ARM"),
        ("Query performance of Kestrel outputs", "Query performance of Kestrel outputs"),
        ("", ""),
    ],
)
def test_strip_preamble(raw: str, expected: str) -> None:
    assert strip_preamble(raw) == expected


def test_strip_preamble_removes_only_a_leading_label() -> None:
    text = "How do I set the output: stdout in Kestrel?"
    assert strip_preamble(text) == text


@pytest.mark.parametrize("text", ["Output-plugin settings for Kestrel", "Query-time filtering in Kestrel"])
def test_strip_preamble_keeps_hyphenated_first_word(text: str) -> None:
    assert strip_preamble(text) == text
