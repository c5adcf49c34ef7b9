"""Combining ranked lists."""

from __future__ import annotations

from collections.abc import Sequence


def weighted_rrf(
    rankings: Sequence[tuple[float, Sequence[tuple[int, float]]]], *, k: int = 60
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(d) = sum_i weight_i / (k + rank_i(d))`` with 1-based ranks, best first."""
    fused: dict[int, float] = {}
    for weight, ranking in rankings:
        if weight <= 0:
            continue
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
