"""Weighted reciprocal rank fusion, checked against hand-computed scores."""

from __future__ import annotations

import pytest

from anaphora.retrieval.fusion import weighted_rrf

pytestmark = pytest.mark.unit


def test_weighted_rrf_hand_computed():
    lexical = [(1, 9.0), (2, 5.0), (3, 1.0)]  # the scores themselves are ignored, only ranks count
    dense = [(3, 0.9), (4, 0.8)]
    fused = weighted_rrf([(1.0, lexical), (0.5, dense)], k=60)
    expected = {
        1: 1.0 / 61,
        2: 1.0 / 62,
        3: 1.0 / 63 + 0.5 / 61,
        4: 0.5 / 62,
    }
    assert [key for key, _ in fused] == [3, 1, 2, 4]
    for key, score in fused:
        assert score == pytest.approx(expected[key], rel=1e-12)


def test_weight_zero_removes_a_list():
    fused = weighted_rrf([(1.0, [(1, 0.0), (2, 0.0)]), (0.0, [(2, 0.0), (9, 0.0)])], k=60)
    assert fused == [(1, pytest.approx(1 / 61)), (2, pytest.approx(1 / 62))]
    assert 9 not in dict(fused)


def test_negative_weight_is_ignored_like_zero():
    assert weighted_rrf([(-1.0, [(5, 0.0)])]) == []


def test_ties_broken_by_key():
    fused = weighted_rrf([(1.0, [(6, 0.0), (5, 0.0)]), (1.0, [(5, 0.0), (6, 0.0)])], k=60)
    assert [key for key, _ in fused] == [5, 6]
    assert fused[0][1] == pytest.approx(fused[1][1])


def test_small_k_and_default_k():
    assert weighted_rrf([(2.0, [(7, 0.0), (8, 0.0)])], k=1) == [(7, 1.0), (8, pytest.approx(2 / 3))]
    assert weighted_rrf([(1.0, [(7, 0.0)])]) == [(7, pytest.approx(1 / 61))]


def test_empty_inputs():
    assert weighted_rrf([]) == []
    assert weighted_rrf([(1.0, []), (1.0, [])]) == []


def test_scaling_all_weights_keeps_the_order():
    lists = [[(1, 0), (2, 0), (3, 0)], [(3, 0), (2, 0), (1, 0), (4, 0)]]
    a = weighted_rrf([(1.0, lists[0]), (3.0, lists[1])])
    b = weighted_rrf([(10.0, lists[0]), (30.0, lists[1])])
    assert [key for key, _ in a] == [key for key, _ in b] == [3, 2, 1, 4]


def test_minmax_combsum_hand_computed():
    from anaphora.retrieval.fusion import normalised_sum

    bm25 = [(1, 12.0), (2, 6.0), (3, 2.0)]  # -> 1.0, 0.4, 0.0
    dense = [(3, 0.9), (4, 0.5)]  # -> 1.0, 0.0
    fused = dict(normalised_sum([(0.5, bm25), (1.0, dense)], method="minmax"))
    assert fused == {1: pytest.approx(0.5), 2: pytest.approx(0.2), 3: pytest.approx(1.0), 4: pytest.approx(0.0)}
    mnz = dict(normalised_sum([(0.5, bm25), (1.0, dense)], method="minmax", mnz=True))
    assert mnz[3] == pytest.approx(2.0) and mnz[1] == pytest.approx(0.5)


def test_zscore_missing_key_gets_the_list_floor():
    from anaphora.retrieval.fusion import normalise

    scores, floor = normalise([(1, 3.0), (2, 1.0)], "zscore")
    assert scores == {1: pytest.approx(1.0), 2: pytest.approx(-1.0)} and floor == pytest.approx(-1.0)
    assert normalise([(1, 2.0), (2, 2.0)], "minmax")[0] == {1: 1.0, 2: 1.0}  # no spread: no preference
    assert normalise([], "zscore") == ({}, 0.0)


def test_score_fusion_scale_free():
    """Multiplying one list's scores by a constant (BM25's scale differs per query) changes nothing."""
    from anaphora.retrieval.fusion import normalised_sum

    bm25 = [(1, 9.0), (2, 4.0), (3, 1.0)]
    dense = [(2, 0.8), (3, 0.7), (1, 0.1)]
    for method in ("minmax", "zscore"):
        a = normalised_sum([(0.5, bm25), (1.0, dense)], method=method)
        b = normalised_sum([(0.5, [(k, s * 100) for k, s in bm25]), (1.0, dense)], method=method)
        assert [k for k, _ in a] == [k for k, _ in b]
