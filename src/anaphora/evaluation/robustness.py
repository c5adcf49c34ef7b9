"""Paired comparison of two query sources on the same tasks: is the pipeline ever worse than the bare message?

For each follow-up task with gold, the per-task Recall@k of the system and of the baseline (both measured through
the same retriever) give a difference; its mean comes with a paired bootstrap 95% interval (resampling tasks with
replacement, percentile method, fixed seed so reruns agree), and the shares of tasks where the system is below
("harmed") or above ("helped") the baseline. Groups: all follow-ups and each ``multi_turn`` label.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

from anaphora.evaluation.metrics import recall_at

BOOTSTRAP_SAMPLES = 10_000


def paired_bootstrap(
    differences: Sequence[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = 13, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean of ``differences`` over bootstrap resamples of the tasks."""
    if not differences:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    n = len(differences)
    values = list(differences)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    tail = (1 - level) / 2
    low = means[int(tail * samples)]
    high = means[min(samples - 1, int((1 - tail) * samples))]
    return (low, high)


def _per_task(records: Sequence[dict[str, Any]], k: int) -> dict[str, float]:
    return {
        r["task_id"]: recall_at([p["id"] for p in r["ranked"]], r["gold"], k)
        for r in records
        if r["gold"] and r["turn"] > 1
    }


def compare(
    system: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], *, k: int = 5, min_group: int = 1
) -> dict[str, dict[str, Any]]:
    """Per group (``follow-ups``, ``multi_turn=<label>`` with at least ``min_group`` tasks): n, both means, the mean
    difference with its 95% interval, harmed and helped shares."""
    ours, theirs = _per_task(system, k), _per_task(baseline, k)
    labels = {r["task_id"]: r["multi_turn"] for r in system}
    groups: dict[str, list[str]] = {"follow-ups": [t for t in ours if t in theirs]}
    for task_id in groups["follow-ups"]:
        for label in labels.get(task_id, []):
            groups.setdefault(f"multi_turn={label}", []).append(task_id)
    table: dict[str, dict[str, Any]] = {}
    for name, members in groups.items():
        if len(members) < min_group:
            continue
        differences = [ours[t] - theirs[t] for t in members]
        low, high = paired_bootstrap(differences)
        table[name] = {
            "n": len(members),
            f"system_recall@{k}": round(statistics.fmean(ours[t] for t in members), 4),
            f"baseline_recall@{k}": round(statistics.fmean(theirs[t] for t in members), 4),
            "difference": round(statistics.fmean(differences), 4),
            "ci95": [round(low, 4), round(high, 4)],
            "harmed": round(sum(d < 0 for d in differences) / len(members), 4),
            "helped": round(sum(d > 0 for d in differences) / len(members), 4),
        }
    return table
