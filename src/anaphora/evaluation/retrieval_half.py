"""The retrieval half of a turn, run without generation over a stage list evaluation builds itself: the retrieval
stages exactly as :func:`anaphora.app.build_stages` composes them for the engine, from the same parts, so what is
measured is what a turn does. Swapping the query strategy (a baseline) or adding a stage (an experiment) changes
this list only, never a running engine's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.app import Components, build_stages
from anaphora.metrics import Metrics
from anaphora.pipeline.engine import run_stages, trace_of
from anaphora.pipeline.observer import StageObserver
from anaphora.pipeline.query import QueryStage
from anaphora.pipeline.stage import Stage
from anaphora.pipeline.stages import QueryPlanner
from anaphora.pipeline.state import TurnRequest, TurnState
from anaphora.types import Message, Passage, TurnTrace


@dataclass(frozen=True)
class RetrievalHalf:
    """Retrieval stages in order; :meth:`run` returns all ranked candidates and the trace, whose ``retrieved``
    holds the passages selected for the prompt. Its stages are counted by its own ``observer`` (not a service's)."""

    stages: tuple[Stage, ...]
    observer: StageObserver

    @classmethod
    def of(cls, stages: Sequence[Stage], metrics: Metrics | None = None) -> RetrievalHalf:
        return cls(tuple(stages), StageObserver(metrics or Metrics()))

    def with_query(self, strategy: QueryStage) -> RetrievalHalf:
        """The same stages with ``strategy`` planning the query (same time budget)."""
        stages = [
            QueryPlanner(strategy, timeout_s=s.budget_s) if isinstance(s, QueryPlanner) else s for s in self.stages
        ]
        return RetrievalHalf(tuple(stages), self.observer)

    def with_stage(self, stage: Stage, *, after: str) -> RetrievalHalf:
        """The same stages with ``stage`` inserted after the one named ``after``."""
        names = [s.name for s in self.stages]
        if after not in names:
            raise ValueError(f"no stage named {after!r}; the stages are {', '.join(names)}")
        at = names.index(after) + 1
        return RetrievalHalf((*self.stages[:at], stage, *self.stages[at:]), self.observer)

    async def run(self, question: str, history: Sequence[Message]) -> tuple[list[Passage], TurnTrace]:
        """``question`` and ``history`` must already be sanitised."""
        state = TurnState(question=question, request=TurnRequest(question), history=tuple(history))
        state, records = await run_stages(self.observer, self.stages, state)
        return list(state.candidates), trace_of(state, records)


def retrieval_half(components: Components) -> RetrievalHalf:
    """The retrieval stages of ``components``' turns, built again from the parts the engine's were built from."""
    stages = build_stages(components.settings, components.stage_parts)
    return RetrievalHalf.of([s for s in stages if s.retrieval])
