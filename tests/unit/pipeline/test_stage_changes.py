"""A stage returns its changes; the observer applies to the turn's state only the fields the stage declares in
``writes`` and refuses any other, naming the stage, the field and the fix. Run through the observer, as the engine
runs every stage (:func:`anaphora.testing.stages.run_stage`)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from anaphora.errors import PipelineError
from anaphora.metrics import Metrics
from anaphora.pipeline.stage import Changes, Stage, StageResult
from anaphora.pipeline.state import TurnState
from anaphora.testing.stages import run_stage, turn_state
from anaphora.types import Citation

pytestmark = pytest.mark.unit


class Returns(Stage):
    """Returns the changes it is given (``fails``: raises instead, so the fallback's changes are applied)."""

    name = "returns"
    reads = ("answer",)
    writes = ("answer", "answer_source")

    def __init__(self, changes: Changes | TurnState, *, fails: bool = False, fallback: Changes | None = None) -> None:
        self.changes = changes
        self.fails = fails
        self.fell_back = fallback

    async def run(self, state: TurnState) -> StageResult:
        if self.fails:
            raise RuntimeError("broken")
        return StageResult(self.changes, "ok")  # type: ignore[arg-type]

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str] | None:
        return None if self.fell_back is None else (self.fell_back, "fell back")


def state() -> TurnState:
    return turn_state("How do I install Kestrel?", answer="Use the Helm chart.", citations=(Citation(id="c1"),))


def unchanged(before: TurnState, after: TurnState, *changed: str) -> list[str]:
    """The fields other than ``changed`` whose value differs between the two states."""
    names = [f.name for f in fields(TurnState) if f.name not in changed]
    return [n for n in names if getattr(before, n) is not getattr(after, n)]


async def test_only_the_declared_changes_are_applied_and_every_other_field_is_the_same_object() -> None:
    before = state()
    after, record = await run_stage(Returns({"answer": "Use Helm."}), before)
    assert after.answer == "Use Helm." and before.answer == "Use the Helm chart."  # a new state; the old one as it was
    assert after.answer_source == before.answer_source  # declared, not returned: left as it was
    assert unchanged(before, after, "answer") == []
    assert record is not None and record.status == "ok"


@pytest.mark.parametrize("result", [{}, None], ids=["empty", "default"])
async def test_a_stage_that_returns_no_changes_leaves_the_state(result: dict | None) -> None:
    class Nothing(Stage):
        name = "nothing"
        reads = ("answer",)
        writes = ("answer",)

        async def run(self, state: TurnState) -> StageResult:
            return StageResult(result, "ok", "nothing to do") if result is not None else StageResult()

    before = state()
    after, record = await run_stage(Nothing(), before)
    assert after is before
    assert record is not None and record.detail == ("nothing to do" if result is not None else "")


async def test_a_change_of_an_undeclared_field_is_refused_naming_the_stage_the_field_and_the_fix() -> None:
    metrics = Metrics()
    with pytest.raises(PipelineError, match="stage 'returns' returned a change of 'citations'") as caught:
        await run_stage(Returns({"answer": "Use Helm.", "citations": ()}), state(), metrics=metrics)
    assert caught.value.hint == "add 'citations' to Returns.writes, or leave it out of the changes it returns"
    assert metrics.value("anaphora_stage_runs_total", stage="returns", status="ok") == 0  # refused: not counted


async def test_the_refusal_is_by_name_even_when_the_value_is_the_one_the_state_has() -> None:
    """Returning a field is writing it: a stage cannot pass an undeclared field through, changed or not."""
    before = state()
    with pytest.raises(PipelineError, match="returned a change of 'citations'"):
        await run_stage(Returns({"citations": before.citations}), before)


async def test_a_field_the_state_does_not_have_is_refused_like_an_undeclared_one() -> None:
    with pytest.raises(PipelineError, match="returned a change of 'answr'"):
        await run_stage(Returns({"answr": "typo"}), state())


async def test_a_whole_state_returned_the_old_way_is_refused_with_the_fix() -> None:
    before = state()
    with pytest.raises(PipelineError, match="returned a whole TurnState, not its changes") as caught:
        await run_stage(Returns(before.update(answer="Use Helm.")), before)
    assert "StageResult({field: new value, ...})" in (caught.value.hint or "")


async def test_a_failed_optional_stage_applies_its_fallbacks_changes() -> None:
    before = state()
    after, record = await run_stage(Returns({}, fails=True, fallback={"answer_source": "abstain"}), before)
    assert after.answer_source == "abstain" and unchanged(before, after, "answer_source") == []
    assert record is not None and record.status == "error" and record.detail == "RuntimeError: broken; fell back"
    same, _ = await run_stage(Returns({}, fails=True, fallback={}), before)
    assert same is before


async def test_a_fallback_is_held_to_the_declared_writes_too() -> None:
    with pytest.raises(PipelineError, match="'returns' returned a change of 'citations'"):
        await run_stage(Returns({}, fails=True, fallback={"citations": ()}), state())
