"""The first-stage retriever interface the pipeline depends on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from anaphora.types import Passage


class Fused(list[Passage]):
    """A turn's candidates, best first, and the weight each of its queries had when their rankings were fused (in
    the order the queries were given, duplicates and blanks dropped; 0 for a query left out, as a vaguer phrasing
    of a message that stands alone is). What the trace shows of the fusion."""

    def __init__(self, passages: Iterable[Passage] = (), weights: Sequence[float] = ()) -> None:
        super().__init__(passages)
        self.weights = tuple(weights)


class Retriever(Protocol):
    """Ranks passages for one or more queries of the same turn, their rankings fused into one list, best first.

    Rules: ``run_many`` never mutates its inputs; an empty corpus gives ``[]``, not an error. ``message`` is the
    user's message as typed, when it is one of the queries: a phrasing of it (an expansion, a rewrite) whose own
    ranking is less sure of its head than the message's never outweighs it, and when the message leads (the first
    query), another query joins it only with a head much surer than its own.
    """

    async def run_many(
        self, queries: Sequence[str], *, limit: int | None = None, message: str | None = None
    ) -> Fused: ...
