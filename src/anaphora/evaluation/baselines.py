"""Query stages that bypass the rewriter, as evaluation baselines."""

from __future__ import annotations

from collections.abc import Sequence

from anaphora.pipeline.query import QueryPlan
from anaphora.types import Message


class FixedQuery:
    """Retrieve with a given string (the task's last-turn query or its reference rewrite)."""

    calls_model = False

    def __init__(self, query: str, source: str) -> None:
        self.query = query
        self.source = source

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return self.fallback_plan(question, history)

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return QueryPlan(query=self.query, source=self.source, status="skipped", detail="baseline")


class AllQuestionsQuery:
    """Every user question of the conversation so far, concatenated (a common naive baseline)."""

    calls_model = False

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return self.fallback_plan(question, history)

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        asked = [m.content for m in history if m.role == "user"] + [question]
        return QueryPlan(query=" ".join(asked), source="all-questions", status="skipped", detail="baseline")
