"""The stage contract: every step of a turn is a small class with ``async run(state) -> StageResult``.

A stage never touches metrics, spans or the trace: :class:`~anaphora.pipeline.observer.StageObserver` writes all
three from the result. An *optional* stage declares ``fallback``: when it raises or exceeds ``timeout_s``, the
observer catches it, counts it (``status="error"`` or ``"timeout"``) and continues with the fallback's state, so
"every optional stage fails open" holds by construction. A required stage (``fallback`` returns ``None``) fails
the turn.

To add a stage: subclass :class:`Stage`, give it a ``name``, and insert it with :meth:`Engine.add_stage`.
"""

from __future__ import annotations

from dataclasses import dataclass

from anaphora.pipeline.state import TurnState
from anaphora.types import StageStatus


@dataclass(frozen=True, slots=True)
class StageResult:
    state: TurnState
    status: StageStatus = "ok"
    detail: str = ""


class Stage:
    """Base class of the turn's stages. Defaults: runs on every turn, required, no time budget, no counter."""

    name: str = "stage"
    retrieval: bool = False  # part of the retrieval half, which evaluation runs alone (Engine.retrieve)
    timeout_s: float | None = None
    counter: str | None = None  # a named outcome counter in Metrics.requests ("rewriter", "reranker", ...)

    def applies(self, state: TurnState) -> bool:
        """Whether the stage runs on this turn; a stage that does not apply leaves no trace record."""
        return True

    async def run(self, state: TurnState) -> StageResult:
        raise NotImplementedError

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str] | None:
        """The state to go on with when :meth:`run` failed (``failure`` says how) and a note on what it fell back
        to; ``None``: the stage is required."""
        return None
