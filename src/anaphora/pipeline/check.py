"""The answer check: every unit of a generated answer is held against the shown passages and the conversation
(:mod:`anaphora.answering.support`); in ``drop`` mode unsupported units are removed, in ``mark`` mode they are kept
and their verdicts reported. When nothing of the answer survives, ``auto`` answers extractively and otherwise the
turn abstains with the one fixed phrase.

Streaming stays honest: in ``drop`` mode the generator's deltas pass through :class:`UnitRelease`, which holds each
unit back until it is complete and checked, so nothing unsupported is ever drafted to the turn's stream. The check
is one strategy of the answer stage (:mod:`anaphora.pipeline.answer`); it never sends anything itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Literal

from anaphora.answering.citations import BRACKETED
from anaphora.answering.extractive import ExtractiveAnswerer
from anaphora.answering.support import FENCE, SupportChecker, Unit, split_units
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from anaphora.types import Passage, UnitVerdict

_SENTENCE_CLOSED = re.compile(r"[.!?][\"')\]]*$")

NOT_COVERED = "The documents do not cover this"  # how every abstention opens (what later turns recognise)
ABSTAIN = f"{NOT_COVERED}: none of the passages I found is relevant enough to answer from."
LEFT_OUT = "(Part of this answer was left out: the documents did not support it.)"
CheckMode = Literal["drop", "mark", "off"]
AnswerMode = Literal["generate", "extractive", "auto"]


def render(unit: Unit, verdict: UnitVerdict, known: set[str]) -> str:
    """A kept unit as shown in ``drop`` mode: the model's own ``[id]`` markers replaced by the passage that
    supports it (a marker pointing at a passage that does not is dropped)."""
    if unit.kind == "code":
        return unit.text

    def keep_unknown(match: re.Match) -> str:
        return "" if any(part.strip() in known for part in re.split(r"[,;]", match.group(1))) else match.group(0)

    text = re.sub(r"\s*" + BRACKETED.pattern, keep_unknown, unit.text)
    if verdict.passage_id is None:
        return text
    end = re.search(r"[.!?:]$", text)
    marker = f" [{verdict.passage_id}]"
    return text[: end.start()] + marker + text[end.start() :] if end else text + marker


class Judged:
    """An answer's units with their verdicts, and what ``drop`` mode keeps of it."""

    def __init__(self, checker: SupportChecker, text: str, known: set[str]) -> None:
        self.units = split_units(text)
        self.verdicts = [checker.check(u) for u in self.units]
        self.known = known
        self.supported = any(v.verdict == "supported" for v in self.verdicts)

    def kept(self, index: int) -> bool:
        """Supported units, and filler ("Here is how:") when something of substance is kept."""
        verdict = self.verdicts[index].verdict
        return verdict == "supported" or (verdict == "filler" and self.supported)

    def pieces(self) -> list[tuple[str, str]]:
        """(separator before, rendered text) of each kept unit."""
        kept: list[tuple[str, str]] = []
        separator = ""
        for index, unit in enumerate(self.units):
            if self.kept(index) and unit.text:
                kept.append((separator if kept else "", render(unit, self.verdicts[index], self.known)))
                separator = unit.separator
            elif kept and not separator.strip():
                separator = separator or unit.separator
        return kept

    def dropped(self) -> int:
        return sum(1 for i, u in enumerate(self.units) if u.text and not self.kept(i))

    def report(self, *, drop: bool) -> list[UnitVerdict]:
        """The verdicts as the trace carries them. A unit ``drop`` mode left out keeps its verdict, reason and
        missing tokens but not its text: the trace goes to the client, and what was dropped must not reach it."""
        report = []
        for index, verdict in enumerate(self.verdicts):
            if not self.units[index].text:
                continue
            kept = self.kept(index) if drop else True
            report.append(verdict.model_copy(update={"kept": kept} if kept else {"kept": False, "text": ""}))
        return report


class UnitRelease:
    """Stands between the generator and the turn's stream: takes the generator's deltas, passes each unit on to
    ``relay`` once the next one has begun and the check has kept it. :meth:`flush` releases the last unit and
    returns all passed on."""

    def __init__(self, checker: SupportChecker, known: set[str], relay: Callable[[str], None]) -> None:
        self.checker = checker
        self.known = known
        self.relay = relay
        self.text = ""
        self.released = ""  # what has been passed on

    def add(self, delta: str) -> None:
        self.text += delta
        self._release(final=False)

    def flush(self) -> str:
        self._release(final=True)
        return self.released

    def _release(self, *, final: bool) -> None:
        units = split_units(self.text)
        growing = not final and units and not finished(units[-1])
        complete = units[:-1] if growing else units
        judged = Judged(self.checker, "".join(u.text + u.separator for u in complete), self.known)
        text = "".join(before + rendered for before, rendered in judged.pieces())
        if len(text) > len(self.released) and text.startswith(self.released):
            self.relay(text[len(self.released) :])
            self.released = text


def finished(unit: Unit) -> bool:
    """Whether more text can no longer change this unit: a sentence that ended with its punctuation and a space,
    a line that ended, a code block that was closed."""
    if unit.kind == "code":
        return sum(1 for line in unit.text.splitlines() if FENCE.match(line)) >= 2
    if "\n" in unit.separator:
        return True
    return bool(unit.separator) and unit.kind == "sentence" and bool(_SENTENCE_CLOSED.search(unit.text))


def checker_for(state: TurnState, threshold: float) -> SupportChecker:
    """The sources of this turn: the passages shown, the question and the conversation. A turn answered without
    retrieval (chit-chat, a request about the conversation) has no passage to ground in: only its risky tokens
    (numbers, commands, paths...) are checked, against the conversation."""
    shown: Sequence[Passage] = state.prompt.passages if state.prompt and state.retrieves else []
    memories = state.prompt.memories if state.prompt else []
    conversation = [state.question, state.summary, *(m.content for m in state.history)]
    grounded = state.retrieves or bool(memories)
    return SupportChecker([*shown, *memories], conversation, threshold=threshold if grounded else 0.0)


class AnswerCheck(Stage):
    """Judges the generated answer unit by unit; keeps what is supported (``drop``) or marks it (``mark``); falls
    back to an extractive answer (``auto``) or the fixed abstention when nothing is supported. A strategy of the
    answer stage; a stage of its own only where it is run alone (benchmarks re-check captured answers)."""

    name = "check"
    reads = (  # the extractive fallback (auto) reads what the answer stage's quote reads
        "answer",
        "answer_source",
        "prompt",
        "question",
        "request",
        "summary",
        "history",
        "skip",
        "plan",
        "candidates",
        "selected",
        "memory",
        "said_back",
    )
    writes = ("answer", "answer_source", "support", "selected")

    def __init__(
        self, mode: CheckMode, answer_mode: AnswerMode, threshold: float, extractive: ExtractiveAnswerer | None
    ) -> None:
        self.mode = mode
        self.answer_mode = answer_mode
        self.threshold = threshold
        self.extractive = extractive

    def applies(self, state: TurnState) -> bool:
        return self.mode != "off" and state.answer_source == "model"

    def release(self, state: TurnState, relay: Callable[[str], None]) -> UnitRelease | None:
        """What the generator's stream passes through (``drop`` mode only: a unit is drafted once it is kept)."""
        if self.mode != "drop":
            return None
        return UnitRelease(checker_for(state, self.threshold), self._known(state), relay)

    @staticmethod
    def _known(state: TurnState) -> set[str]:
        return {p.id for p in (*state.prompt.passages, *state.prompt.memories)} if state.prompt else set()

    async def run(self, state: TurnState) -> StageResult:
        judged = Judged(checker_for(state, self.threshold), state.answer, self._known(state))
        report = tuple(judged.report(drop=self.mode == "drop"))
        counts = f"{sum(v.verdict == 'supported' for v in report)}/{len(report)} units supported"
        if self.mode == "mark":  # the text stays as the model wrote it (and as it was streamed)
            return StageResult({"support": report}, "ok", counts)
        if not judged.supported:
            return await self._replace(state, report, counts)
        answer = "".join(before + text for before, text in judged.pieces())
        if judged.dropped():
            answer = f"{answer}\n\n{LEFT_OUT}"
        detail = f"{counts}, {judged.dropped()} left out"
        return StageResult({"answer": answer, "support": report}, "ok", detail)

    async def _replace(self, state: TurnState, report: tuple[UnitVerdict, ...], counts: str) -> StageResult:
        """Nothing of the model's answer is supported (so nothing of it was streamed): quote the passages
        (``auto``), else abstain."""
        extract = None
        if self.answer_mode == "auto" and self.extractive is not None:
            extract = await self.extractive.answer_turn(state.extract_request())
        if extract is not None:
            quoted = {"support": report, **state.quote(extract)}
            return StageResult(quoted, "ok", f"{counts}: answered from the passages instead")
        changes = {"support": report, "answer": ABSTAIN, "answer_source": "abstain"}
        return StageResult(changes, "ok", f"{counts}: abstained")
