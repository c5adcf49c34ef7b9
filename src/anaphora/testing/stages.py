"""Run one stage alone, as the engine would (observed, failing open, only its declared changes applied), for
testing a stage of your own."""

from __future__ import annotations

from collections.abc import Sequence

from anaphora.metrics import Metrics
from anaphora.pipeline.observer import StageObserver
from anaphora.pipeline.stage import Stage
from anaphora.pipeline.state import TurnRequest, TurnState
from anaphora.reading.message import read
from anaphora.types import Message, StageRecord


def turn_state(question: str, history: Sequence[Message] = (), **fields) -> TurnState:
    """A starting state for ``question`` (already sanitised) and ``history``, read as the router stage reads it."""
    fields.setdefault("reading", read(question))
    return TurnState(question=question, request=TurnRequest(question), history=tuple(history), **fields)


async def run_stage(
    stage: Stage, state: TurnState, *, metrics: Metrics | None = None
) -> tuple[TurnState, StageRecord | None]:
    """The state after ``stage`` (its changes applied; the same state when it returned none) and its trace record
    (``None`` when the stage does not apply)."""
    records: list[StageRecord] = []
    after = await StageObserver(metrics or Metrics()).run(stage, state, records)
    return after, (records[0] if records else None)
