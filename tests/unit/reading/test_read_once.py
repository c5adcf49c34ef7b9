"""The user's message is read once per turn: every rule that reads text runs at most once per text and turn, and the
stages use the router's :class:`~anaphora.reading.message.Reading` instead of calling the rules again."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

import pytest

from anaphora import Anaphora, Settings
from anaphora.reading import dates, extract, focus, intents, personal, route
from anaphora.reading.message import read
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

# the rules a Reading is made of, by module
RULES = {
    intents: ("recognise", "is_chit_chat", "points_at_answer"),
    route: ("continuation", "shifts_topic", "returns_to_topic", "mentions_reference"),
    personal: ("asks_what_user_said", "possessive", "states_about_user"),
    extract: ("extract_facts",),
    dates: ("asks_about_past",),
    focus: ("asks_how", "asks_amount"),
}
SRC = Path(__file__).resolve().parents[3] / "src" / "anaphora"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every rule wrapped with a counter of (rule, text), wherever a module of the package bound it by name."""
    calls: Counter = Counter()
    for module, names in RULES.items():
        for name in names:
            original = getattr(module, name)

            def counting(text, *args, _name=name, _original=original, **kwargs):
                calls[(_name, text)] += 1
                return _original(text, *args, **kwargs)

            for loaded in [m for n, m in sys.modules.items() if n.startswith("anaphora") and m is not None]:
                if getattr(loaded, name, None) is original:
                    monkeypatch.setattr(loaded, name, counting)
    return calls


def test_each_rule_runs_at_most_once_per_text_and_turn(settings: Settings, fake_model, counted: Counter) -> None:
    with Anaphora(settings.model_copy(update={"answer_mode": "extractive"}), model=fake_model) as rag:
        rag.ingest([SAMPLE_DOCS])
        conversation = rag.new_conversation()
        turns = (
            "fyi we run everything on ARM64 nodes",
            "how do I install it on Kubernetes?",
            "and what did I say our nodes run on?",
            "thanks! say that again, shorter",
        )
        for question in turns:
            read.cache_clear()  # a new turn: nothing read before it counts
            counted.clear()
            rag.ask(question, conversation)
            rag.run(rag.components.engine.drain())  # the turn's memory writing reads it too
            repeated = {key: n for key, n in counted.items() if n > 1}
            assert not repeated, f"{question!r}: rules run more than once on one text: {repeated}"
            assert counted[("recognise", question)] == 1  # the router read it


def test_no_module_outside_reading_calls_the_rules_a_reading_holds() -> None:
    """Stages take the rules' verdicts from the turn's Reading (or :func:`read` for an earlier message); a direct
    call would read the same words again."""
    names = {name for group in RULES.values() for name in group}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "reading":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("anaphora.reading"):
                found += [f"{path.relative_to(SRC)}: {a.name}" for a in node.names if a.name in names]
    assert not found, "\n".join(found)
