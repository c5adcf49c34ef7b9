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
