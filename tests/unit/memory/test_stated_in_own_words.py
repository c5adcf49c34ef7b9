"""A statement no fact rule read answers a question about what the user said in the user's own words."""

from __future__ import annotations

import pytest

from anaphora.memory.recall import Recalled
from anaphora.memory.selection import Asked, stated_in_own_words
from anaphora.memory.types import MemoryItem
from anaphora.reading.message import read

pytestmark = pytest.mark.unit


def recalled_episode(text: str) -> Recalled:
    item = MemoryItem(id="e1", user_id="bo", kind="episode", text=text, conversation_id="c1", turns=(0,), time=1.0)
    return Recalled(item, 1.0, 0.9, "")


@pytest.mark.parametrize(
    ("question", "answers"),
    [
        ("which python version do we run?", True),
        ("what version of Python are we on?", True),
        ("which version did I say we run?", True),
        ("which postgres version do we run?", False),  # the statement names no postgres
        ("which database do we use?", False),
    ],
)
def test_a_statements_version_answers_a_question_about_a_version_of_what_it_names(question: str, answers: bool) -> None:
    """No fact rule reads "fyi we deploy on a Debian VM behind nginx, with Python 3.12"; on a Python project's docs
    "python" is a word every page uses, so sharing it is no evidence: the statement's version is (Flask's docs,
    read as a user: "which python version do we run?" was answered "you haven't told me")."""
    statement = recalled_episode("fyi we deploy on a Debian VM behind nginx, with Python 3.12")
    asked = Asked(read(question), everyday=("python",))
    assert bool(stated_in_own_words([statement], asked)) is answers
