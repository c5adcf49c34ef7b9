"""The stage contract: every step of a turn is a small class with ``async run(state) -> StageResult``.

A stage declares the fields of :class:`~anaphora.pipeline.state.TurnState` it ``reads`` and the ones it ``writes``.
The engine checks the order when it is built and at every ``add_stage``: each read must be written by the turn's
start (:data:`~anaphora.pipeline.state.INITIAL`) or by a stage before it, else a :class:`PipelineError` names the
stage and the field.

A stage returns only what it changes (``StageResult({"answer": text}, "ok", detail)``), never a whole state, and
the observer applies to the turn's state the names the stage declares in ``writes`` and refuses any other
(:func:`applied`): a stage has no channel to a field it did not declare, so the declarations the engine decides by
(when the answer is final and may be streamed, among others) cannot be wrong about what a stage changed.

A stage never touches metrics, spans, the trace or the stream: :class:`~anaphora.pipeline.observer.StageObserver`
writes the first three from the result, and the engine's :class:`~anaphora.pipeline.sink.AnswerSink` owns the
stream. An *optional* stage declares ``fallback``: when it raises or exceeds ``timeout_s``, the observer catches
it, counts it (``status="error"`` or ``"timeout"``) and applies the fallback's changes instead, so "every optional
stage fails open" holds by construction. A required stage (``fallback`` returns ``None``) fails the turn.

To add a stage: subclass :class:`Stage`, give it a ``name``, ``reads`` and ``writes``, and insert it with
:meth:`Engine.add_stage`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anaphora.errors import PipelineError
from anaphora.pipeline.state import FIELDS, INITIAL, Changes, TurnState
from anaphora.types import StageStatus

if TYPE_CHECKING:
    from anaphora.pipeline.sink import AnswerSink

__all__ = ["Changes", "ReleasingStage", "Stage", "StageResult", "applied", "check_order"]


@dataclass(frozen=True, slots=True)
class StageResult:
    """What a stage did: ``changes``, the new values of fields it declares in ``writes`` (none: the turn's state
    stays as it was), its ``status`` and a ``detail`` for the trace record."""

    changes: Changes = field(default_factory=dict)
    status: StageStatus = "ok"
    detail: str = ""


class Stage:
    """Base class of the turn's stages. Defaults: runs on every turn, required, no time budget, no counter.

    ``reads`` and ``writes`` have no default: a concrete stage (one that defines ``run``) must declare both, or its
    class is refused when it is created. Silence is not "writes nothing": the engine streams the answer live only
    when no stage after the answer stage declares ``answer``, so a forgotten declaration would stream text that a
    later stage meant to change."""

    name: str = "stage"
    reads: tuple[str, ...]  # the TurnState fields run (and applies) look at
    writes: tuple[str, ...]  # the TurnState fields its changes may name
    retrieval: bool = False  # part of the retrieval half, which evaluation runs alone (Engine.retrieve)
    releases: bool = False  # decides the answer as it streams (the answer stage): the sink drafts through it
    timeout_s: float | None = None
    counter: str | None = None  # a named outcome counter in Metrics.requests ("rewriter", "reranker", ...)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if vars(cls).get("base_stage") or ("run" not in vars(cls) and "release" not in vars(cls)):
            return  # not a concrete stage: a base that subclasses complete
        missing = [name for name in ("reads", "writes") if not hasattr(cls, name)]
        if missing:
            raise PipelineError(
                f"stage class {cls.__name__} does not declare {' and '.join(missing)}",
                hint=f"give {cls.__name__} the TurnState fields it "
                + " and ".join(
                    {"reads": "reads (reads = (...))", "writes": "may change (writes = (...), () for none)"}[n]
                    for n in missing
                ),
            )

    def applies(self, state: TurnState) -> bool:
        """Whether the stage runs on this turn; a stage that does not apply leaves no trace record."""
        return True

    async def run(self, state: TurnState) -> StageResult:
        """What the stage changes on this turn (``StageResult(changes, status, detail)``); ``state`` is read only."""
        raise NotImplementedError

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str] | None:
        """The changes to go on with when :meth:`run` failed (``failure`` says how; ``{}``: the state as it was)
        and a note on what it fell back to; ``None``: the stage is required."""
        return None


class ReleasingStage(Stage):
    """The stage that decides the answer as it streams (the answer stage): the one stage the engine hands the turn's
    stream (:class:`~anaphora.pipeline.sink.AnswerSink`) to. No other stage can reach the stream: it is not part of
    the turn's state."""

    releases = True
    base_stage = True  # its subclasses declare what they read and write

    async def run(self, state: TurnState) -> StageResult:
        return await self.release(state, None)

    async def release(self, state: TurnState, sink: AnswerSink | None) -> StageResult:
        """Decide the answer (the changes, as :meth:`Stage.run` returns them), drafting it into ``sink`` as it is
        generated (``None``: nobody streams)."""
        raise NotImplementedError


def check_order(stages: Sequence[Stage], written: Collection[str] = INITIAL) -> None:
    """Refuse a stage list in which a stage reads a field that neither the turn's start nor an earlier stage
    writes, or declares a field ``TurnState`` does not have."""
    known = set(written)
    for stage in stages:
        for name in (*stage.reads, *stage.writes):
            if name not in FIELDS:
                raise PipelineError(
                    f"stage {stage.name!r} declares {name!r}, which is not a TurnState field",
                    hint=f"the fields are {', '.join(sorted(FIELDS))}",
                )
        missing = [name for name in stage.reads if name not in known]
        if missing:
            raise PipelineError(
                f"stage {stage.name!r} reads {missing[0]!r}, which no stage before it writes",
                hint=f"insert it after a stage that writes {missing[0]!r}, or add such a stage before it",
            )
        known.update(stage.writes)


def applied(stage: Stage, state: TurnState, changes: Changes) -> TurnState:
    """``state`` with the ``changes`` ``stage`` returned, all of them named in its ``writes``: a change of any other
    field is refused whole (nothing is applied; the turn fails), naming the stage and the field. No changes: the
    same state."""
    if isinstance(changes, TurnState):  # the contract of before: a whole state
        raise PipelineError(
            f"stage {stage.name!r} returned a whole TurnState, not its changes",
            hint=f"return StageResult({{field: new value, ...}}) from {type(stage).__name__}, naming only the "
            "fields it writes",
        )
    if not changes:
        return state
    for name in changes:
        if name not in stage.writes:
            raise PipelineError(
                f"stage {stage.name!r} returned a change of {name!r}, which it does not declare in writes",
                hint=f"add {name!r} to {type(stage).__name__}.writes, or leave it out of the changes it returns",
            )
    return state.update(**changes)
