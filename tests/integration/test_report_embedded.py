"""The report over the scripted conversations of tests/data/report_conversations.jsonl on the embedded MiniLM
embedder (at the default relevance floor and topic threshold, as a deployment runs it; the fake chat model
answers): refused turns are the gaps, the follow-up counts under its resolved search, an erased visitor is gone."""

from __future__ import annotations

import pytest

from anaphora.report.signals import topic_key
from tests.unit.report.test_report_scripted import (
    check_refused_turns_are_the_gaps,
    check_the_follow_up_counts_under_its_resolved_search,
    play,
    report,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    rag, turns = play(tmp_path_factory.mktemp("report-minilm") / "data", embedder="minilm")
    with rag:
        yield rag, turns


def test_refused_turns_are_the_gaps(played) -> None:
    check_refused_turns_are_the_gaps(*played)


def test_the_follow_up_counts_under_its_resolved_search(played) -> None:
    check_the_follow_up_counts_under_its_resolved_search(*played)


def test_the_two_install_questions_are_one_topic_and_upgrading_another(played) -> None:
    rag, _ = played
    found = report(rag)
    assert "all-MiniLM-L6-v2" in found.grouping
    [install] = [t for t in found.top_topics if "How do I install Kestrel on Linux ARM?" in t.questions]
    assert "How do I install Kestrel on Linux?" in install.questions and install.users == 2
    assert not any("upgrade" in topic_key(s) for s in install.searches)


def test_an_erased_visitor_is_not_in_the_report(played) -> None:
    rag, _ = played
    assert "Quuxbridge" in report(rag).model_dump_json()
    rag.erase_user("visitor-3")
    after = report(rag)
    assert "Quuxbridge" not in after.model_dump_json() and after.users == 2
