"""An episode whose facts were all superseded says what is no longer true: it is not shown as evidence (unless the
question asks about the past), while one that still holds a current fact is."""

from __future__ import annotations

import pytest

from anaphora.memory.recall import Recalled
from anaphora.memory.selection import Asked, ShowPolicy, select
from anaphora.memory.types import MemoryItem
from anaphora.reading.message import read

pytestmark = pytest.mark.unit
POLICY = ShowPolicy(k=4, min_score=0.0, fact_min_score=0.0)


def recalled(
    item_id: str, kind: str, text: str, conversation: str, *, value: str = "", superseded: bool = False
) -> Recalled:
    item = MemoryItem(
        id=item_id,
        user_id="alice",
        kind=kind,
        text=text,
        conversation_id=conversation,
        turns=(0,),
        time=1.0,
        attribute="uses windows" if kind == "fact" else "",
        value=value,
        valid_to=2.0 if superseded else None,
    )
    return Recalled(item, 1.0, 0.9, "")


RANKED = [
    recalled("e1", "episode", "I'm on a Windows 11 laptop and PowerShell is my shell.", "c1"),
    recalled("f1", "fact", "the user is on a Windows 11 laptop", "c1", value="Windows 11 laptop", superseded=True),
    recalled("e2", "episode", "I'm on macOS with zsh now. No more Windows.", "c2"),
    recalled("f2", "fact", "the user no longer uses Windows", "c2", value="no longer Windows"),
]


def verdicts(question: str) -> dict[str, str]:
    chosen = select(RANKED, Asked(read(question)), POLICY, depth=10).chosen
    return {c.recalled.item.id: c.reason for c in chosen}


def test_an_episode_whose_facts_were_all_superseded_is_not_shown() -> None:
    found = verdicts("what goes in my shell startup file?")
    assert found["e1"] == "what it says of the user was superseded since"
    assert found["e2"] == "shown"


def test_an_episode_of_an_older_value_still_holds() -> None:
    """A newer value supersedes the fact, but the episode still says what was true then: only "no longer" makes it
    untrue."""
    ranked = [
        recalled("e1", "episode", "I'm on a Windows 11 laptop.", "c1"),
        recalled("f1", "fact", "the user is on a Windows 11 laptop", "c1", value="Windows 11 laptop", superseded=True),
        recalled("f2", "fact", "the user is on a Windows 11 laptop at work", "c2", value="Windows 11 laptop at work"),
    ]
    chosen = select(ranked, Asked(read("what goes in my shell startup file?")), POLICY, depth=10).chosen
    assert {c.recalled.item.id: c.reason for c in chosen}["e1"] == "shown"


def test_a_question_about_the_past_still_gets_it() -> None:
    assert verdicts("which laptop was I on before?")["e1"] in ("shown", "leads")
