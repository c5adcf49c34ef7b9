"""The paired robustness report: bootstrap interval, harmed / helped shares, per multi_turn label."""

from __future__ import annotations

import pytest

from anaphora.evaluation.robustness import compare, paired_bootstrap

pytestmark = pytest.mark.unit


def record(task_id: str, ranked: list[str], gold: list[str], turn: int = 2, label: str = "Follow-up") -> dict:
    return {
        "task_id": task_id,
        "turn": turn,
        "multi_turn": [label],
        "ranked": [{"id": i} for i in ranked],
        "gold": gold,
    }


def test_bootstrap_interval_of_a_constant_is_the_constant():
    assert paired_bootstrap([0.25] * 30) == (pytest.approx(0.25), pytest.approx(0.25))


def test_bootstrap_interval_covers_the_mean_and_is_reproducible():
    differences = [1.0, 0.0, 0.0, -0.5, 0.5, 0.0, 1.0, 0.0, 0.0, 0.0] * 3
    low, high = paired_bootstrap(differences)
    mean = sum(differences) / len(differences)
    assert low < mean < high
    assert (low, high) == paired_bootstrap(differences)
    assert low > -0.2 and high < 0.5


def test_compare_counts_harmed_and_helped_on_follow_ups_only():
    baseline = [
        record("a", ["g1", "x"], ["g1"]),
        record("b", ["x", "y"], ["g2"]),
        record("c", ["g3"], ["g3"]),
        record("d", ["g4"], ["g4"], label="Clarification"),
        record("t1", ["x"], ["g5"], turn=1),
    ]
    system = [
        record("a", ["g1"], ["g1"]),  # same
        record("b", ["g2"], ["g2"]),  # helped
        record("c", ["x"], ["g3"]),  # harmed
        record("d", ["g4"], ["g4"], label="Clarification"),  # same
        record("t1", ["g5"], ["g5"], turn=1),  # turn 1: not a follow-up
    ]
    table = compare(system, baseline, k=5)
    row = table["follow-ups"]
    assert row["n"] == 4
    assert row["difference"] == 0.0
    assert row["harmed"] == 0.25 and row["helped"] == 0.25
    assert row["system_recall@5"] == row["baseline_recall@5"] == 0.75
    assert table["multi_turn=Follow-up"]["n"] == 3
    assert table["multi_turn=Clarification"]["n"] == 1
    assert compare(system, baseline, k=5, min_group=2).keys() == {"follow-ups", "multi_turn=Follow-up"}


def test_recall_at_k_cuts_the_ranking():
    baseline = [record("a", ["x", "g"], ["g"])]
    system = [record("a", ["g", "x"], ["g"])]
    assert compare(system, baseline, k=1)["follow-ups"]["difference"] == 1.0
    assert compare(system, baseline, k=2)["follow-ups"]["difference"] == 0.0
