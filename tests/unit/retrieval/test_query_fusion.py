"""Per-turn query weights from the dense lists' head margins, and the fusion they drive."""

from __future__ import annotations

import pytest

from anaphora.pipeline.query import QueryPlan
from anaphora.retrieval.fusion import weighted_rrf
from anaphora.retrieval.query_fusion import head_margin, keep_in_head, query_weights
from anaphora.types import Passage

pytestmark = pytest.mark.unit

CLEAR = [(1, 0.80), (2, 0.40), (3, 0.40), (4, 0.40)]  # one passage stands out: margin 0.8 - 0.5 = 0.3
VAGUE = [(5, 0.46), (6, 0.45), (7, 0.45), (8, 0.44)]  # many middling passages: margin 0.01


def test_head_margin_is_best_minus_mean():
    assert head_margin(CLEAR) == pytest.approx(0.30)
    assert head_margin(VAGUE) == pytest.approx(0.01)
    assert head_margin([(1, 0.9)]) is None and head_margin([]) is None
    assert head_margin(CLEAR, depth=2) == pytest.approx(0.20)


def test_the_main_query_always_weighs_one():
    assert query_weights([0.3], 0.5) == [1.0]
    assert query_weights([], 0.5) == []


def test_alternate_weight_follows_the_ratio_of_margins_and_is_capped():
    main, clearer, vaguer = 0.2, 0.4, 0.1
    weights = query_weights([main, clearer, vaguer], 0.5)
    assert weights == [1.0, pytest.approx(1.0), pytest.approx(0.25)]
    assert query_weights([0.2, 0.2], 0.5) == [1.0, pytest.approx(0.5)]  # equal clarity: the prior
    assert query_weights([0.1, 10.0], 0.5)[1] == 1.0  # never above the main query


def test_without_margins_the_prior_applies():
    assert query_weights([None, 0.3], 0.5) == [1.0, 0.5]
    assert query_weights([0.3, None], 0.5) == [1.0, 0.5]
    assert query_weights([0.0, 0.3], 0.5) == [1.0, 0.5]
    assert query_weights([0.3, -0.1], 0.5) == [1.0, 0.0]


def test_a_clear_message_keeps_its_passage_on_top_of_a_vague_expansion():
    """The message singles out passage 1; the expansion drifted to a vague list. Adaptive weights keep passage 1
    first; the fixed prior (0.5) lets the expansion's whole head outrank it."""
    message = CLEAR
    expansion = VAGUE
    adaptive = query_weights([head_margin(expansion), head_margin(message)], 0.5)
    fused = weighted_rrf([(adaptive[0], expansion), (adaptive[1], message)], k=60)
    assert fused[0][0] == 1
    fixed = weighted_rrf([(1.0, expansion), (0.5, message)], k=60)
    assert [key for key, _ in fixed[:4]] == [5, 6, 7, 8]


def test_a_vague_message_defers_to_a_clear_expansion():
    adaptive = query_weights([head_margin(CLEAR), head_margin(VAGUE)], 0.5)
    assert adaptive[1] < 0.05
    fused = weighted_rrf([(adaptive[0], CLEAR), (adaptive[1], VAGUE)], k=60)
    assert [key for key, _ in fused[:4]] == [1, 2, 3, 4]


def test_plan_lead_goes_first_and_query_stays_the_rewrite():
    plan = QueryPlan("rewrite text", "rewrite", alternates=("expanded text", "message"), lead="expanded text")
    assert plan.query == "rewrite text"
    assert plan.queries == ["expanded text", "rewrite text", "message"]
    assert QueryPlan("q", "question", alternates=("m",)).queries == ["q", "m"]


def test_a_message_at_least_as_clear_as_its_expansion_is_retrieved_alone():
    expansion, message = head_margin(VAGUE), head_margin(CLEAR)
    assert query_weights([expansion, message], 0.5, message=1) == [0.0, 1.0]
    assert query_weights([0.2, 0.2], 0.5, message=1) == [0.0, 1.0]  # as clear: the user's words win the tie
    # vaguer than the expansion: the usual weights, the message as an alternate
    assert query_weights([message, expansion], 0.5, message=1) == query_weights([message, expansion], 0.5)
    # with a rewrite riding along (lead, rewrite, message): every phrasing vaguer than the message gives way
    assert query_weights([0.1, 0.3, 0.2], 0.5, message=2) == [0.0, 0.0, 1.0]
    # the message leading with a much clearer alternate, or unknown, or without a margin: nothing changes
    assert query_weights([0.1, 0.3], 0.5, message=0) == query_weights([0.1, 0.3], 0.5)
    assert query_weights([0.1, None], 0.5, message=1) == [1.0, 0.5]


def passages(*ids: str) -> list[Passage]:
    return [Passage(id=i, text=i, score=1.0 - n / 10) for n, i in enumerate(ids)]


def test_keep_in_head_moves_the_missing_ones_into_the_heads_last_places():
    fused = passages("a", "b", "c", "d", "e", "f", "g", "h")
    own = passages("g", "b", "h")
    kept = keep_in_head(fused, own, head=5)  # own's top 2: "b" is shown already, "g" takes the fifth place
    assert [p.id for p in kept] == ["a", "b", "c", "d", "g", "e", "f", "h"]
    assert [p.score for p in kept] == sorted((p.score for p in kept), reverse=True)
    assert kept[4].score == kept[5].score  # the place's score, a tie that keeps the order
    both = keep_in_head(fused, passages("h", "g"), head=5)
    assert [p.id for p in both] == ["a", "b", "c", "h", "g", "d", "e", "f"]
    assert keep_in_head(fused, passages("a", "c"), head=5) == fused  # both shown already
    assert [p.id for p in keep_in_head(fused, passages("z"), head=2)] == ["a", "z", "b", "c", "d", "e", "f", "g"]
    assert keep_in_head(fused, own, head=1) == fused  # one place: none is the message's


def test_a_message_that_leads_drops_a_vaguer_alternate_and_keeps_a_clearer_one():
    """A message that stands alone leads; the topic's expansion (or a rewrite riding along) joins only where its
    head is much clearer than the message's (:data:`TOPIC_CLARITY`), weighed as any alternate; a vaguer one would
    only blur the message's ranking."""
    assert query_weights([0.2, 0.1], 0.5, message=0) == [1.0, 0.0]
    assert query_weights([0.2, 0.2], 0.5, message=0) == [1.0, 0.0]  # as clear: nothing gained by blurring it
    assert query_weights([0.2, 0.4], 0.5, message=0) == [1.0, pytest.approx(1.0)]
    assert query_weights([0.2, 0.2, 0.32], 0.5, message=0) == [1.0, 0.0, pytest.approx(0.8)]
    assert query_weights([0.2, 0.1], 0.5) == [1.0, pytest.approx(0.25)]  # a message that is no query of the turn
    # no margin to compare (BM25-only retrieval): no evidence the alternate is clearer, so it does not join
    assert query_weights([None, None], 0.5, message=0) == [1.0, 0.0]
    assert query_weights([0.2, None], 0.5, message=0) == [1.0, 0.0]
