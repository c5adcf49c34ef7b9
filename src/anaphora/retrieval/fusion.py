"""Combining ranked lists.

Two families. *Rank* fusion (:func:`weighted_rrf`) looks only at positions. *Score* fusion
(:func:`normalised_sum`) rescales each list's own scores per query (min-max or z-score) so lists of different
scales (BM25 scores, cosine similarities) can be added, CombSUM style; ``mnz`` multiplies by the number of lists
that found the passage (CombMNZ). A passage missing from a list gets that list's floor: 0 after min-max, the
lowest z-score seen in the list after z-score normalisation (it scored below everything the list returned).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

Ranking = Sequence[tuple[int, float]]
Normalisation = Literal["minmax", "zscore"]
Key = TypeVar("Key", bound=Hashable)  # chunk keys here; memory item ids in long-term memory recall


def weighted_rrf(rankings: Sequence[tuple[float, Ranking]], *, k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(d) = sum_i weight_i / (k + rank_i(d))`` with 1-based ranks, best first."""
    fused: dict[int, float] = {}
    for weight, ranking in rankings:
        if weight <= 0:
            continue
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def normalise(ranking: Sequence[tuple[Key, float]], method: Normalisation) -> tuple[dict[Key, float], float]:
    """Each key's normalised score and the floor a missing key gets. A list whose scores are all equal gives every
    member 1 (min-max) or 0 (z-score): it carries no preference among its own members."""
    if not ranking:
        return {}, 0.0
    scores = [score for _, score in ranking]
    if method == "minmax":
        low, high = min(scores), max(scores)
        span = high - low
        return {key: (score - low) / span if span > 0 else 1.0 for key, score in ranking}, 0.0
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if std == 0:
        return {key: 0.0 for key, _ in ranking}, 0.0
    normalised = {key: (score - mean) / std for key, score in ranking}
    return normalised, min(normalised.values())


def normalised_sum(
    rankings: Sequence[tuple[float, Sequence[tuple[Key, float]]]],
    *,
    method: Normalisation = "zscore",
    mnz: bool = False,
    found_bonus: float = 0.0,
) -> list[tuple[Key, float]]:
    """CombSUM (or CombMNZ with ``mnz``) of per-query normalised scores, weighted, best first; ties by key.
    ``found_bonus``: what being in a list at all adds (times the list's weight), so the last of a list still
    outranks what the list did not find (long-term memory recall uses 0.01)."""
    lists = [(weight, *normalise(ranking, method)) for weight, ranking in rankings if weight > 0 and ranking]
    keys = {key for _, scores, _ in lists for key in scores}
    fused: dict[Key, float] = {}
    for key in keys:
        total = sum(weight * (scores[key] + found_bonus if key in scores else floor) for weight, scores, floor in lists)
        if mnz:
            total *= sum(1 for _, scores, _ in lists if key in scores)
        fused[key] = total
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
