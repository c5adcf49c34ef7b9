"""The report over scripted conversations (shaped like bench realdocs-dev's conversations.jsonl), each run as its
own visitor through the real engine (the fake chat model, the hashing embedder, the sample documents): refused turns
are listed as gaps, a follow-up counts under the topic it resolved to, and an erased visitor leaves nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from anaphora import Anaphora
from anaphora.report import ReportOptions, to_csv, to_text
from tests.conftest import ROOT, SAMPLE_DOCS

pytestmark = pytest.mark.unit
SCRIPT = ROOT / "tests" / "data" / "report_conversations.jsonl"


def conversations() -> list[dict]:
    return [json.loads(line) for line in SCRIPT.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    """The script played once: (the facade, {(visitor, position in the script): (conversation id, stored turn)})."""
    data = tmp_path_factory.mktemp("report") / "data"
    with Anaphora(data_dir=data, chat_model="fake", embedder="hashing") as rag:
        rag.ingest([SAMPLE_DOCS])
        turns = {}
        for script in conversations():
            conversation = rag.new_conversation(script["id"], user_id=script["user"])
            for n, turn in enumerate(script["turns"]):
                rag.ask(turn["user"], conversation, user_id=script["user"])
                turns[(script["user"], n)] = (conversation, rag.turns(conversation, user_id=script["user"])[-1])
        yield rag, turns


def report(rag: Anaphora, **options):
    return rag.report(0, time.time() + 60, ReportOptions(**options))


def test_refused_turns_are_the_gaps(played) -> None:
    rag, turns = played
    unanswerable = {t["user"] for s in conversations() for t in s["turns"] if not t["answerable"]}
    for (_, _), (_, turn) in turns.items():
        if turn.question in unanswerable:
            assert turn.trace.abstained, f"the engine answered {turn.question!r}: {turn.answer!r}"
    found = report(rag)
    refused = {g.question for g in found.gaps if g.gap == "refused"}
    assert refused == unanswerable
    gap_topics = {t.topic for t in found.gap_topics if t.refused}
    assert len(gap_topics) == len(unanswerable)
    assert all(any(word in t.lower() for word in ("zanzibar", "quuxbridge")) for t in gap_topics)


def test_a_follow_up_counts_under_the_topic_it_resolved_to(played) -> None:
    rag, turns = played
    _, follow_up = turns[("visitor-1", 1)]
    assert follow_up.question == "and on ARM?"
    resolved = follow_up.trace.query.lower()
    assert "install" in resolved and "arm" in resolved, resolved
    found = report(rag)
    [topic] = [t for t in found.top_topics if "and on ARM?" in t.questions]
    assert topic.follow_ups >= 1
    assert all("and on arm" != s.lower().rstrip("?") for s in topic.searches)  # never counted under its own words
    assert any("install" in s.lower() and "arm" in s.lower() for s in topic.searches)
    assert not any(t.topic.lower().startswith("and on arm") for t in found.top_topics)


def test_near_duplicate_questions_of_two_visitors_are_one_topic(played) -> None:
    rag, _ = played
    found = report(rag, min_similarity=0.5)
    [topic] = [t for t in found.top_topics if "How do I install Kestrel on Linux ARM?" in t.questions]
    assert "and on ARM?" in topic.questions and topic.users == 2, topic


def test_shares_pages_and_formats(played) -> None:
    rag, _ = played
    found = report(rag)
    assert found.turns == sum(len(s["turns"]) for s in conversations()) and found.users == 3
    assert found.shares.chit_chat == 1 and found.shares.meta == 1
    assert found.shares.chit_chat_share == pytest.approx(1 / found.turns, abs=1e-3)
    cited = {p.source for p in found.pages_cited_most}
    assert cited and not cited & set(found.pages_never_cited)
    assert cited | set(found.pages_never_cited) == {p.name for p in SAMPLE_DOCS.iterdir()}
    assert "Documentation gaps" in to_text(found)
    rows = to_csv(found).splitlines()
    assert sum(r.startswith("gap,") for r in rows) == len(found.gaps)


def test_an_erased_visitor_leaves_nothing_in_the_report(tmp_path: Path) -> None:
    with Anaphora(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing") as rag:
        rag.ingest([SAMPLE_DOCS])
        secret = "How do I configure the Zanzibar flux capacitor for visitor nine?"
        for visitor, question in (("visitor-9", secret), ("visitor-8", "How do I upgrade Kestrel?")):
            conversation = rag.new_conversation(user_id=visitor)
            rag.ask(question, conversation, user_id=visitor)
            rag.rate(conversation, 0, "down", f"{visitor} is unhappy", user_id=visitor)
        before = report(rag).model_dump_json()
        assert secret in before and "visitor-9 is unhappy" in before
        rag.erase_user("visitor-9")
        after = report(rag)
        text = after.model_dump_json()
        assert "Zanzibar" not in text and "visitor-9" not in text and after.users == 1
        assert [d.comment for d in after.thumbs_down] == ["visitor-8 is unhappy"]
