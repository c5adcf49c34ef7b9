"""How one stored turn reads in the report and the hand-off: its kind, what it searched, whether it is a gap."""

from __future__ import annotations

import pytest

from anaphora.report.signals import LOW_SUPPORT_SHARE, WEAK_MATCH, gap_of, handoff, searched, share_of, topic_key
from anaphora.types import Passage, TurnTrace, UnitVerdict

pytestmark = pytest.mark.unit


def trace(**fields) -> TurnTrace:
    return TurnTrace(question=fields.pop("question", "q"), **fields)


def unit(verdict: str, kept: bool = True) -> UnitVerdict:
    return UnitVerdict(text="u", verdict=verdict, precision=1.0, kept=kept)


def test_the_search_is_the_resolved_query_not_the_words_typed() -> None:
    follow_up = trace(question="and on ARM?", query="install Kestrel on Linux ARM")
    assert searched("and on ARM?", follow_up) == "install Kestrel on Linux ARM"
    assert searched("hello there", trace(question="hello there")) == "hello there"  # no retrieval, no query
    assert searched("old turn", None) == "old turn"


def test_topic_keys_ignore_case_spacing_and_end_punctuation() -> None:
    assert (
        topic_key("  How do I  install Kestrel? ")
        == topic_key("how do i install kestrel")
        == "how do i install kestrel"
    )
    assert topic_key("install on ARM") != topic_key("install on x86")


@pytest.mark.parametrize(
    ("fields", "share"),
    [
        ({"route": "chit_chat", "retrieval_skipped": True}, "chit_chat"),
        ({"route": "meta", "retrieval_skipped": True}, "meta"),
        ({"route": "follow_up", "retrieval_skipped": True}, "meta"),  # the skip gate answered from the history
        ({"route": "new_query", "answer_source": "acknowledged"}, "statement"),
        ({"route": "follow_up"}, "documentation"),
        ({"route": None}, "documentation"),
    ],
)
def test_shares(fields, share) -> None:
    assert share_of(trace(**fields)) == share


def test_refusals_are_gaps_and_small_talk_never_is() -> None:
    assert gap_of(trace(route="new_query", abstained=True, answer_source="abstain")) == "refused"
    assert gap_of(trace(route="new_query", answer_source="abstain")) == "refused"
    assert gap_of(trace(route="chit_chat", retrieval_skipped=True, answer_source="conversation")) is None
    assert gap_of(None) is None


def test_checked_answers_are_weak_when_most_units_lacked_support() -> None:
    dropped = [unit("supported"), unit("unsupported", kept=False), unit("unsupported", kept=False), unit("filler")]
    assert LOW_SUPPORT_SHARE == 0.5
    assert gap_of(trace(route="new_query", support=dropped)) == "low_support"
    half = [unit("supported"), unit("unsupported", kept=False)]
    assert gap_of(trace(route="new_query", support=half)) is None  # half supported: not below the share
    marked = [unit("supported"), unit("unsupported"), unit("unsupported")]  # 'mark' mode keeps them: still weak
    assert gap_of(trace(route="new_query", support=marked)) == "low_support"


def test_unchecked_answers_are_weak_when_the_best_passage_is_a_poor_match() -> None:
    def passage(dense: float | None) -> Passage:
        return Passage(id="p", text="t", dense_score=dense)

    weak = trace(route="new_query", answer_source="extractive", retrieved=[passage(WEAK_MATCH - 0.05)])
    strong = trace(route="new_query", answer_source="extractive", retrieved=[passage(0.1), passage(WEAK_MATCH + 0.1)])
    lexical = trace(route="new_query", answer_source="extractive", retrieved=[passage(None)])
    assert gap_of(weak) == "low_support"
    assert gap_of(strong) is None and gap_of(lexical) is None


def test_the_handoff_needs_a_link_and_a_gap() -> None:
    refused = trace(route="new_query", abstained=True, answer_source="abstain")
    link = handoff(refused, "https://example.com/support")
    assert link is not None and (link.url, link.reason) == ("https://example.com/support", "refused")
    assert handoff(refused, "") is None
    assert handoff(trace(route="new_query"), "https://example.com/support") is None


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "99999999999999d", "yesterday", "", "2026-13-01"])
def test_times_that_no_store_can_hold_are_refused(value) -> None:
    from anaphora.errors import InputError
    from anaphora.report.ranges import parse_when

    with pytest.raises(InputError) as caught:
        parse_when(value, 1_767_000_000.0, name="since")
    assert "since" in caught.value.message and "7d" in caught.value.hint


def test_times_people_write() -> None:
    from anaphora.report.ranges import parse_when, time_range

    now = 1_767_000_000.0
    assert parse_when("7d", now, name="since") == now - 7 * 86400
    assert parse_when("90m", now, name="since") == now - 5400
    assert parse_when("1767000000", now, name="since") == now
    assert parse_when("2026-01-01", now, name="since") == 1_767_225_600.0
    assert parse_when("2026-01-01T01:00+01:00", now, name="since") == 1_767_225_600.0
    assert time_range(None, None, now) == (now - 7 * 86400, now)
