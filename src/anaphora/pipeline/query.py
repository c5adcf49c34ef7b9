"""Query stages: what the retriever is asked on this turn. The generator never sees it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from anaphora.types import Message, StageStatus


@dataclass(frozen=True, slots=True)
class QueryPlan:
    query: str
    source: str  # "question", "rewrite", "expansion", ...
    status: StageStatus = "skipped"
    detail: str = ""
    model_calls: int = 0


class QueryStage(Protocol):
    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan: ...


class LastMessageQuery:
    """Plain RAG: the retriever sees the user's latest message alone (the last-turn baseline)."""

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return QueryPlan(query=question, source="question", status="skipped", detail="no rewriting configured")
