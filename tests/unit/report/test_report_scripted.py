"""The report over scripted conversations (shaped like bench realdocs-dev's conversations.jsonl), each run as its
own visitor through the real engine (the fake chat model, the hashing embedder, the sample documents): refused turns
are listed as gaps, a follow-up counts under the topic it resolved to, and an erased visitor leaves nothing.
tests/integration/test_report_embedded.py plays the same script on the embedded MiniLM embedder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from anaphora import Anaphora
from anaphora.report import ReportOptions, to_csv, to_text
from anaphora.report.signals import topic_key
from tests.conftest import ROOT, SAMPLE_DOCS

pytestmark = pytest.mark.unit
SCRIPT = ROOT / "tests" / "data" / "report_conversations.jsonl"


def conversations() -> list[dict]:
    return [json.loads(line) for line in SCRIPT.read_text(encoding="utf-8").splitlines() if line.strip()]


# the hashing embedder's cosines run lower than MiniLM's: its relevance floor and its topic threshold are lower
HASHING = {"embedder": "hashing", "similarity_threshold": 0.2}
HASHING_TOPICS = 0.4


def play(data: Path, **settings) -> tuple[Anaphora, dict]:
    """The script played: (the facade, {(visitor, position in the script): (conversation id, stored turn)}); the
    model's rewrites are off (the fake model's would be refused), so follow-ups search the history expansion."""
    rag = Anaphora(data_dir=data, chat_model="fake", rewriter="expansion", **settings)
    rag.ingest([SAMPLE_DOCS])
    turns = {}
    for script in conversations():
        conversation = rag.new_conversation(script["id"], user_id=script["user"])
        for n, turn in enumerate(script["turns"]):
            rag.ask(turn["user"], conversation, user_id=script["user"])
            turns[(script["user"], n)] = (conversation, rag.turns(conversation, user_id=script["user"])[-1])
    return rag, turns


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    rag, turns = play(tmp_path_factory.mktemp("report") / "data", **HASHING)
    with rag:
        yield rag, turns


def report(rag: Anaphora, **options):
    return rag.report(0, time.time() + 60, ReportOptions(**options))


def check_refused_turns_are_the_gaps(rag: Anaphora, turns: dict) -> None:
    unanswerable = {t["user"] for s in conversations() for t in s["turns"] if not t["answerable"]}
    for _, turn in turns.values():
        if turn.question in unanswerable:
            assert turn.trace.abstained, f"the engine answered {turn.question!r}: {turn.answer!r}"
    found = report(rag)
    assert {g.question for g in found.gaps if g.gap == "refused"} == unanswerable
    assert all(g.cited == [] for g in found.gaps if g.gap == "refused")
    gap_topics = [t.topic for t in found.gap_topics if t.refused]
    assert sorted(gap_topics) == sorted(unanswerable)  # each its own topic: they share nothing


def check_the_follow_up_counts_under_its_resolved_search(rag: Anaphora, turns: dict, **options) -> list:
    """The follow-up's topic (returned with the report's topics): its resolved search, never its own words."""
    _, follow_up = turns[("visitor-1", 1)]
    assert follow_up.question == "and on ARM?"
    resolved = follow_up.trace.query.lower()
    assert "install" in resolved and "arm" in resolved, resolved
    found = report(rag, **options)
    [topic] = [t for t in found.top_topics if "and on ARM?" in t.questions]
    assert topic.follow_ups >= 1
    assert any("install" in s.lower() and "arm" in s.lower() for s in topic.searches)
    for t in found.top_topics:  # "and on ARM?" is nobody's search and no topic's name
        assert all(topic_key(s) != "and on arm" for s in t.searches) and topic_key(t.topic) != "and on arm"
    return [topic, found.top_topics]


def test_refused_turns_are_the_gaps(played) -> None:
    check_refused_turns_are_the_gaps(*played)


def test_a_follow_up_counts_under_the_topic_it_resolved_to(played) -> None:
    check_the_follow_up_counts_under_its_resolved_search(*played)


def test_near_duplicate_questions_of_two_visitors_are_one_topic(played) -> None:
    """Grouped, the follow-up counts with the two install questions, named by a question asked as such."""
    topic, topics = check_the_follow_up_counts_under_its_resolved_search(*played, min_similarity=HASHING_TOPICS)
    assert "How do I install Kestrel on Linux ARM?" in topic.questions and topic.users == 2, topic
    assert (topic.turns, topic.follow_ups) == (3, 1) and topic.topic.startswith("How do I install Kestrel")
    assert topics[0] == topic  # asked most
    assert not any("upgrade" in s.lower() for s in topic.searches)


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
    with Anaphora(data_dir=tmp_path / "data", chat_model="fake", **HASHING) as rag:
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


def test_the_facade_votes_only_on_the_users_own_turns_with_a_short_comment(played) -> None:
    from anaphora.errors import InputError, TurnNotFoundError

    rag, turns = played
    conversation, turn = turns[("visitor-2", 0)]
    with pytest.raises(TurnNotFoundError):
        rag.rate(conversation, turn.index, "up", user_id="visitor-1")
    with pytest.raises(InputError, match="more than the 2000"):
        rag.rate(conversation, turn.index, "up", "x" * 2001, user_id="visitor-2")
    assert rag.turns(conversation, user_id="visitor-2")[0].feedback is None
