"""The reranker interface. Scores are in [0, 1] so that one threshold means the same across backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage text) pairs.

    Rules: returns one score in [0, 1] per text, in the order given (higher = more relevant), or ``None`` for "no
    opinion: keep the first-stage order"; raises on failure (the pipeline catches it, counts it and keeps the
    first-stage order); never mutates its inputs. ``aclose`` releases what it holds (a network client).
    """

    name: str

    async def score(self, query: str, texts: Sequence[str]) -> list[float] | None: ...

    async def aclose(self) -> None: ...


class NoModelReranker:
    """The no-model null object: has no opinion, so the first-stage order (dense similarity) stands."""

    name = "none"

    async def score(self, query: str, texts: Sequence[str]) -> None:
        return None

    async def aclose(self) -> None:
        return None
