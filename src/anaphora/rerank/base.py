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
    ``calls_model``: whether ``score`` runs a model (or a service) at all, so the select stage knows whether there
    is a time budget to keep.
    """

    name: str
    calls_model: bool

    async def score(self, query: str, texts: Sequence[str]) -> list[float] | None: ...

    async def aclose(self) -> None: ...


class NoModelReranker:
    """The no-model null object: has no opinion, so the first-stage order (dense similarity) stands."""

    name = "none"
    calls_model = False

    async def score(self, query: str, texts: Sequence[str]) -> None:
        return None

    async def aclose(self) -> None:
        return None
