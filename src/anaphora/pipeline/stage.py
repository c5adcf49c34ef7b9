"""The stage contract: every step of a turn is a small class with ``async run(state) -> StageResult``.

A stage declares the fields of :class:`~anaphora.pipeline.state.TurnState` it ``reads`` and the ones it ``writes``.
The engine checks the order when it is built and at every ``add_stage``: each read must be written by the turn's
start (:data:`~anaphora.pipeline.state.INITIAL`) or by a stage before it, else a :class:`PipelineError` names the
stage and the field. While the turn runs, the observer refuses a stage that changed a field it did not declare.

A stage never touches metrics, spans, the trace or the stream: :class:`~anaphora.pipeline.observer.StageObserver`
writes the first three from the result, and the engine's :class:`~anaphora.pipeline.sink.AnswerSink` owns the
stream. An *optional* stage declares ``fallback``: when it raises or exceeds ``timeout_s``, the observer catches
it, counts it (``status="error"`` or ``"timeout"``) and continues with the fallback's state, so "every optional
stage fails open" holds by construction. A required stage (``fallback`` returns ``None``) fails the turn.

To add a stage: subclass :class:`Stage`, give it a ``name``, ``reads`` and ``writes``, and insert it with
:meth:`Engine.add_stage`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

from anaphora.errors import PipelineError
from anaphora.pipeline.state import FIELDS, INITIAL, UNTRACKED, TurnState
from anaphora.types import StageStatus

if TYPE_CHECKING:
    from anaphora.pipeline.sink import AnswerSink

_TRACKED = tuple(sorted(FIELDS - UNTRACKED))
_tracked_values = attrgetter(*_TRACKED)  # every tracked field in one call: this runs after every stage


@dataclass(frozen=True, slots=True)
class StageResult:
    state: TurnState
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
    writes: tuple[str, ...]  # the TurnState fields it may change
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
        raise NotImplementedError

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str] | None:
        """The state to go on with when :meth:`run` failed (``failure`` says how) and a note on what it fell back
        to; ``None``: the stage is required."""
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
        """Decide the answer, drafting it into ``sink`` as it is generated (``None``: nobody streams)."""
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
                    hint=f"the fields are {', '.join(sorted(FIELDS - UNTRACKED))}",
                )
        missing = [name for name in stage.reads if name not in known]
        if missing:
            raise PipelineError(
                f"stage {stage.name!r} reads {missing[0]!r}, which no stage before it writes",
                hint=f"insert it after a stage that writes {missing[0]!r}, or add such a stage before it",
            )
        known.update(stage.writes)


def check_writes(stage: Stage, before: TurnState, after: TurnState) -> None:
    """Refuse a stage that changed a field it did not declare in ``writes`` (the engine relies on the
    declarations to know, among others, when the answer is final and may be streamed)."""
    if after is before:
        return
    for name, old, new in zip(_TRACKED, _tracked_values(before), _tracked_values(after), strict=True):
        if old is not new and name not in stage.writes and old != new:
            raise PipelineError(
                f"stage {stage.name!r} changed {name!r}, which it does not declare in writes",
                hint=f"add {name!r} to {type(stage).__name__}.writes",
            )
