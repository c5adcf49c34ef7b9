"""The reranker interface. Scores are in [0, 1] so that one threshold means the same across backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage text) pairs.

    Rules: returns one score in [0, 1] per text, in the order given (higher = more relevant); raises on failure
    (the pipeline catches it, counts it and keeps the first-stage order); never mutates its inputs.
    """

    name: str

    async def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class NoModelReranker:
    """The no-model fallback: keeps the first-stage order (its scores are the first-stage similarities)."""

    name = "none"

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        raise NotImplementedError("the no-model reranker keeps the first-stage order")
