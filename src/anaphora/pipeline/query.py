"""Query stages: what the retriever is asked on this turn. The generator never sees it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from anaphora.types import Message, StageStatus

if TYPE_CHECKING:
    from anaphora.models.base import Usage
    from anaphora.reading.route import TurnKind


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What to retrieve with. ``alternates`` are further queries whose rankings are fused with the main one's.

    ``lead``, when set, is the query whose ranking leads the fusion (weight 1; every other query is weighed against
    it) while ``query`` stays what the stage resolved the message to (shown in the trace, given to the reranker):
    a small model's accepted rewrite is the query, but the model-free expansion leads and the rewrite earns its
    weight from its own ranking (:mod:`anaphora.retrieval.query_fusion`)."""

    query: str
    source: str  # "question", "rewrite", "expansion", ...
    status: StageStatus = "skipped"
    detail: str = ""
    model_calls: int = 0
    alternates: tuple[str, ...] = ()
    proposed_kind: TurnKind | None = None  # the turn kind a model analysis proposes (the router's route stands)
    answered_by_conversation: bool = False  # the analysis says the history already holds the answer
    lead: str | None = None  # the query that leads the fusion, when not ``query``
    usage: Usage | None = None  # what the model call cost, when one was made

    @property
    def proposes_skip(self) -> bool:
        """The model's analysis says this turn needs no documents: the history holds the answer, or the turn is
        chit-chat or about the conversation. A proposal only: the skip gate weighs it against the message."""
        kind = self.proposed_kind
        return self.answered_by_conversation or (kind is not None and not kind.needs_retrieval)

    @property
    def queries(self) -> list[str]:
        """Every distinct query, the one that leads the fusion first."""
        return list(dict.fromkeys(q for q in (self.lead or self.query, self.query, *self.alternates) if q.strip()))


class QueryStage(Protocol):
    """A query strategy: what to retrieve with for this message and history. ``calls_model``: whether ``run``
    makes a chat-model call (then it is counted as a rewrite, and may fail or time out)."""

    calls_model: bool

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan: ...

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        """The model-free plan a failed or timed-out :meth:`run` degrades to."""
        ...


class LastMessageQuery:
    """Plain RAG: the retriever sees the user's latest message alone (the last-turn baseline)."""

    calls_model = False

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return self.fallback_plan(question, history)

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return QueryPlan(query=question, source="question", status="skipped", detail="no rewriting configured")
