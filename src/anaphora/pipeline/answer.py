"""The answer phase's one stage: abstain, quote, generate, check, fall back - strategies tried in that order.

- **abstain** when retrieval found nothing relevant enough (in the documents or the user's memory);
- **quote** (``answer_mode = "extractive"``) a turn that has passages or memories to quote, with no model call;
- **generate** the answer to the user's original words, under the answer guard
  (:mod:`~anaphora.answering.generate`);
- **check** it unit by unit against what the turn showed (:class:`~anaphora.pipeline.check.AnswerCheck`: ``drop``
  keeps the supported units, ``mark`` reports them, ``off`` skips it);
- **fall back**: an unchecked model that gave no usable answer is replaced by a quote; a checked answer with nothing
  supported by a quote (``auto``) or the abstention.

A stage before it may have decided the answer already (a statement acknowledged, a turn about the conversation
answered from it): the answer stage then does not apply, and the answer stays as it is (the rule is declared: it
reads ``answer``).

The stage decides the answer; it does not send it. While generating it drafts what it has decided so far (in
``drop`` mode only the units the check kept) to the turn's :class:`~anaphora.pipeline.sink.AnswerSink`, which the
engine owns and which passes drafts on only when no later stage may change the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anaphora.answering.answer_guard import ANSWER_STOP
from anaphora.answering.extractive import ExtractiveAnswerer
from anaphora.answering.generate import Relay, generate
from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.check import ABSTAIN, NOT_COVERED, AnswerCheck, AnswerMode
from anaphora.pipeline.prompt import build_messages, system_text
from anaphora.pipeline.stage import ReleasingStage, StageResult
from anaphora.pipeline.state import Changes, TurnState
from anaphora.types import PromptLayout

if TYPE_CHECKING:
    from anaphora.pipeline.sink import AnswerSink

NO_ANSWER = "I could not find this in the documents."
# a question about what the user said, with nothing the user said to answer it: no document can
NOT_TOLD = "You haven't told me that yet, so I can't say: the documents cannot know it."
NOTHING_FOUND = "abstained: no passage passed the relevance thresholds"


def abstention(state: TurnState) -> str:
    """What a turn with nothing to answer from says: the names no page mentions, when the coverage check found
    some (the question is about something the documents do not cover), else the fixed abstention."""
    if state.uncovered:
        return f"{NOT_COVERED}: no page mentions {', '.join(state.uncovered[:3])}."
    return ABSTAIN


class Answer(ReleasingStage):
    """The answer to the user's original words (see the module docstring for the strategies and their order)."""

    name = "answer"
    reads = (
        "answer",
        "question",
        "reading",
        "uncovered",
        "request",
        "history",
        "summary",
        "skip",
        "plan",
        "candidates",
        "selected",
        "memory",
        "profile",
        "said_back",
        "prompt",
        "calls",
    )
    writes = ("answer", "answer_source", "support", "calls", "selected")  # selected: a quote's other passages

    def __init__(
        self,
        model: ChatModel,
        *,
        mode: AnswerMode,
        check: AnswerCheck,
        extractive: ExtractiveAnswerer | None,
        system_prompt: str,
        layout: PromptLayout,
        max_tokens: int,
        temperature: float,
    ) -> None:
        """``extractive``: what quotes the passages (``mode`` 'extractive', and the fallbacks; without it they say
        :data:`NO_ANSWER` or abstain); ``max_tokens`` and ``temperature``: the answer call's, within which a
        request's own options stay."""
        self.model = model
        self.mode = mode
        self.check = check
        self.extractive = extractive
        self.system_prompt = system_prompt
        self.layout = layout
        self.max_tokens = max_tokens
        self.temperature = temperature

    def applies(self, state: TurnState) -> bool:
        return not state.answer  # an earlier stage decided it (acknowledge, converse): never overwritten

    async def release(self, state: TurnState, sink: AnswerSink | None) -> StageResult:
        if state.reading is not None and state.reading.asks_only_what_user_said and not state.leading_facts:
            changes = {"answer": NOT_TOLD, "answer_source": "abstain"}
            return StageResult(changes, "skipped", "asks what the user said, and no stated fact answers it")
        if state.nothing_found:
            return StageResult({"answer": abstention(state), "answer_source": "abstain"}, "skipped", NOTHING_FOUND)
        if self.mode == "extractive" and self.extractive is not None and state.sources:
            return await self._quote(state)
        generated, detail, checked = await self._generate(state, sink)
        answered = state.update(**generated)  # what the fallback and the check read
        if not answered.answer and not checked:  # unchecked, no usable answer: quote the passages, not nothing
            extractive = self.extractive
            quoted = await extractive.answer_turn(answered.extract_request()) if extractive is not None else None
            note = "model gave no usable answer: quoted the best passages instead"
            instead = answered.quote(quoted) if quoted is not None else {"answer": NO_ANSWER}
            return StageResult({**generated, **instead, "answer_source": "extractive"}, "ok", note)
        if not self.check.applies(answered):
            return StageResult(generated, "ok", detail)
        check = await self.check.run(answered)
        notes = "; ".join(d for d in (detail, check.detail) if d)
        return StageResult({**generated, **check.changes}, check.status, notes)

    async def _quote(self, state: TurnState) -> StageResult:
        assert self.extractive is not None
        extract = await self.extractive.answer_turn(state.extract_request())
        if extract is None:
            changes = {"answer": ABSTAIN, "answer_source": "abstain"}
            return StageResult(changes, "skipped", "abstained: no passage sentence is relevant enough")
        return StageResult(state.quote(extract), "ok", f"{len(extract.points)} sentences quoted, no model call")

    def _options(self, state: TurnState) -> ChatOptions:
        request = state.request
        cap = self.max_tokens  # the request's cap, within the settings' (the budget reserved that much)
        max_tokens = cap if request.max_tokens is None else max(1, min(request.max_tokens, cap))
        temperature = self.temperature if request.temperature is None else request.temperature
        return ChatOptions(temperature=temperature, max_tokens=max_tokens, stop=ANSWER_STOP)

    def _relay(self, state: TurnState, sink: AnswerSink | None) -> tuple[Relay | None, object]:
        """Where the generator's deltas go: through the check's unit release (``drop``) to the sink's drafts, or
        straight to them; nowhere when nobody streams (the answer is then generated in one call)."""
        if sink is None or not sink.streaming:
            return None, None
        release = self.check.release(state, sink.draft)
        return (release.add if release is not None else sink.draft), release

    async def _generate(self, state: TurnState, sink: AnswerSink | None) -> tuple[Changes, str, bool]:
        """The model's answer (the changes: answer, its source, the call), a note, and whether it streamed through
        the check's unit release (then the check decides what an empty answer becomes, as it does for one with
        nothing supported)."""
        assert state.prompt is not None  # the budget ran before
        plan = state.prompt
        messages = build_messages(
            system_text(self.system_prompt, state.profile),
            plan.history,
            plan.passages if state.retrieves else None,
            state.question,
            plan.summary,
            self.layout,
            memories=plan.memories,
            history_excerpts=plan.history_excerpts,
        )
        relay, release = self._relay(state, sink)
        generation = await generate(self.model, messages, self._options(state), relay)
        if release is not None:
            release.flush()  # the last unit, now complete
        calls = state.called("answer", usage=generation.usage, first_token_ms=generation.first_token_ms)
        generated = {"calls": calls, "answer": generation.answer, "answer_source": "model"}
        note = "stopped the model repeating itself or echoing the prompt" if generation.guard.tripped else ""
        return generated, note, release is not None
