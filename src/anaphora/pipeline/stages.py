"""The turn's stages, in order: route, query, skip gate, retrieve, select | budget, generate, cite.

Each is a small :class:`~anaphora.pipeline.stage.Stage`. The first five are the retrieval half (what evaluation
replays); the rest answer. Optional stages (query, skip gate, select) declare the fallback they degrade to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.answer_guard import ANSWER_STOP
from anaphora.pipeline.budget import plan_prompt, verbatim_window
from anaphora.pipeline.check import ABSTAIN, AnswerCheck
from anaphora.pipeline.citations import extract_citations
from anaphora.pipeline.conversation_answers import answer_about_conversation
from anaphora.pipeline.coverage import not_covered
from anaphora.pipeline.extractive import ExtractiveAnswerer
from anaphora.pipeline.generate import emit, generate
from anaphora.pipeline.intents import recognise
from anaphora.pipeline.prompt import (
    CONTEXT_FRAMING,
    MEMORY_FRAMING,
    QUESTION_LABEL,
    build_messages,
    format_passage,
    history_context,
    summary_label,
    system_text,
)
from anaphora.pipeline.query import QueryPlan, QueryStage
from anaphora.pipeline.route import (
    TurnKind,
    history_covers,
    route_by_analysis,
    route_by_rules,
    route_by_standalone_test,
)
from anaphora.pipeline.select import PassageSelector
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import Skip, TurnState
from anaphora.retrieval.base import Retriever
from anaphora.retrieval.entity_boost import boost, conversation_entities
from anaphora.retrieval.terms import TermStatistics
from anaphora.settings import Settings
from anaphora.types import Citation

NO_ANSWER = "I could not find this in the documents."


class Router(Stage):
    """Deterministic rules: chit-chat, requests about the conversation, turn 1. A turn the rules leave undecided
    is routed by the query stage (the model's analysis, or the standalone test)."""

    name = "route"
    retrieval = True

    def __init__(self, *, skip_gate: bool) -> None:
        self.skip_gate = skip_gate

    async def run(self, state: TurnState) -> StageResult:
        route = route_by_rules(state.question, bool(state.history))
        skip = Skip(route.kind, route.reason) if route and not route.needs_retrieval and self.skip_gate else None
        return StageResult(state.update(route=route, skip=skip), "ok", route.reason if route else "rules undecided")


class QueryPlanner(Stage):
    """What the retriever is asked: a query strategy's plan (a guarded rewrite, an expansion, the bare message).
    A strategy that calls the model may fail or time out; the plan then falls back to the model-free expansion."""

    name = "query"
    retrieval = True

    def __init__(self, strategy: QueryStage, *, timeout_s: float | None = None) -> None:
        self.strategy = strategy
        self.timeout_s = timeout_s if strategy.calls_model else None
        self.counter = "rewriter" if strategy.calls_model else None

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    def _planned(self, state: TurnState, plan: QueryPlan) -> TurnState:
        route = state.route
        if route is None and plan.kind is not None:
            route = route_by_analysis(plan.kind)
        route = route or route_by_standalone_test(state.question)
        return state.update(plan=plan, route=route, calls=state.called("rewrite", plan.model_calls, plan.usage))

    async def run(self, state: TurnState) -> StageResult:
        plan = await self.strategy.run(state.question, state.history)
        return StageResult(self._planned(state, plan), plan.status, plan.detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        plan = replace(self.strategy.fallback_plan(state.question, state.history), model_calls=1)
        return self._planned(state, plan), f"fallback: {plan.source}"


class SkipGate(Stage):
    """Skips retrieval when the conversation already holds the answer. The model's "already answered" (or "not
    about the documents") is trusted only when the message brings no word the conversation has not seen: a wrong
    skip costs recall, a wrong retrieval costs milliseconds."""

    name = "skip_gate"
    retrieval = True

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.history)

    async def run(self, state: TurnState) -> StageResult:
        plan, route = state.plan, state.route
        says_so = bool(plan and plan.answered_by_conversation) or not (route and route.needs_retrieval)
        if says_so and history_covers(state.question, [m.content for m in state.history]):
            why = f"{route.reason if route else 'analysis'}: the conversation holds the answer"
            return StageResult(state.update(skip=Skip("answered_by_conversation", why)), "ok", "retrieval skipped")
        return StageResult(state, "ok", "retrieval needed")

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return state, "retrieval kept"


class Retrieve(Stage):
    """The hybrid first stage over every query of the plan, fused."""

    name = "retrieve"
    retrieval = True

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    async def run(self, state: TurnState) -> StageResult:
        assert state.plan is not None  # the query stage ran (or fell back) before
        candidates = await self.retriever.run_many(state.plan.queries, message=state.question)
        return StageResult(state.update(candidates=tuple(candidates)), "ok", f"{len(candidates)} candidates")


class BoostEntities(Stage):
    """Candidates that mention the conversation's named things move up, damped (:mod:`~anaphora.retrieval.
    entity_boost`); optional: a failure keeps the first stage's order."""

    name = "entity_boost"
    retrieval = True

    def __init__(self, statistics: Callable[[], TermStatistics | None], strength: float) -> None:
        self.statistics = statistics
        self.strength = strength

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.candidates)

    async def run(self, state: TurnState) -> StageResult:
        entities = conversation_entities(state.question, state.history, self.statistics())
        if not entities:
            return StageResult(state, "skipped", "no named thing rare in this corpus")
        boosted = boost(state.candidates, entities, self.strength)
        names = ", ".join(e.name for e in entities[:8])
        return StageResult(state.update(candidates=tuple(boosted)), "ok", f"entities: {names}")

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return state, "first-stage order"


class Select(Stage):
    """Rerank, apply the thresholds, keep the top k; nothing left means the turn abstains."""

    name = "select"
    retrieval = True
    counter = "reranker"

    def __init__(self, selector: PassageSelector, *, top_k: int) -> None:
        self.selector = selector
        self.top_k = top_k
        self.timeout_s = selector.timeout_s

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    def _selected(self, state: TurnState, passages: list) -> TurnState:
        selected = tuple(passages[: self.top_k])
        return state.update(candidates=tuple(passages), selected=selected, abstain=not selected)

    async def run(self, state: TurnState) -> StageResult:
        assert state.plan is not None
        selection = await self.selector.run(state.plan.query, state.candidates)
        return StageResult(self._selected(state, selection.passages), selection.status, selection.detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return self._selected(state, self.selector.first_stage(state.candidates).passages), "first-stage order"


class CheckCoverage(Stage):
    """Refuses a question about something no passage mentions (:mod:`~anaphora.pipeline.coverage`): the turn
    abstains instead of quoting passages about something else. Optional: a failure keeps the selection."""

    name = "coverage"

    def __init__(self, statistics: Callable[[], TermStatistics | None], close: float) -> None:
        self.statistics = statistics
        self.close = close

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.selected)

    async def run(self, state: TurnState) -> StageResult:
        missing = not_covered(state.question, state.candidates, self.statistics(), close=self.close)
        if not missing:
            return StageResult(state, "ok", "every word the question names is in the corpus")
        detail = f"no passage mentions {', '.join(missing[:5])}: abstained"
        return StageResult(state.update(abstain=True), "ok", detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return state, "selection kept"


class Budget(Stage):
    """One token budget for the whole prompt (see :mod:`anaphora.pipeline.budget`)."""

    name = "budget"

    def __init__(self, settings: Settings, model: ChatModel) -> None:
        self.settings = settings
        self.model = model

    async def run(self, state: TurnState) -> StageResult:
        settings = self.settings
        layout = settings.prompt_layout
        # 'cache_stable': the window goes on from where the previous one started, and never shows what the summary
        # already holds
        previous = state.previous_window_start if layout == "cache_stable" else None
        if previous is not None:
            previous = max(previous, state.summary_covers)
        window = verbatim_window(
            state.turns_before,
            layout=layout,
            max_turns=settings.history_turns,
            min_turns=settings.history_min_turns,
            previous=previous,
        )
        loaded_from = state.turns_before - len(state.history) // 2  # index of the oldest turn in state.history
        plan = plan_prompt(
            count=self.model.count_tokens,
            budget=settings.context_window - settings.answer_max_tokens,
            history_budget=settings.history_budget_tokens,
            max_turns=state.turns_before - window.start,
            system=system_text(settings.system_prompt, state.profile),
            summary=state.summary,
            history=state.history,
            passages=state.selected,
            question=state.question,
            passage_text=format_passage,
            framing=CONTEXT_FRAMING if state.retrieves else "",
            summary_label=summary_label(layout),
            layout=layout,
            turns_folded=window.folded,
            memories=state.memory_passages,
            memory_budget=settings.memory_max_tokens,
            memory_framing=MEMORY_FRAMING + ("" if state.retrieves else QUESTION_LABEL),
            history_excerpts=state.history_excerpts,
            excerpt_text=history_context,
            floor=max(window.start, state.summary_covers) - loaded_from,
            previous_start=None if previous is None else state.previous_window_start - loaded_from,
            answer_reserve=settings.answer_max_tokens,
        )
        decision = plan.decision
        detail = f"{decision.used}/{decision.budget} tokens, {decision.turns_kept} turns"
        if decision.turns_folded:
            folded = decision.turns_folded
            detail += f", {folded} older turn{'s' if folded > 1 else ''} left the window for the summary"
        return StageResult(state.update(prompt=plan), "ok", detail)


class AnswerFromConversation(Stage):
    """``answer_mode = "extractive"``: chit-chat and requests about the conversation (shorten, repeat, point back,
    recap) answered from the history by :mod:`~anaphora.pipeline.conversation_answers`: no retrieval, no model
    call. (With a capable model the generator answers them from the history it is shown.)"""

    name = "converse"

    def applies(self, state: TurnState) -> bool:
        kinds = (TurnKind.CHIT_CHAT, TurnKind.META)
        return not state.retrieves and state.route is not None and state.route.kind in kinds and not state.answer

    async def run(self, state: TurnState) -> StageResult:
        request = recognise(state.question)
        if request is None:
            return StageResult(state, "skipped", "left to the model")
        answer = answer_about_conversation(request, state.history, (ABSTAIN, NO_ANSWER))
        emit(state.deltas, answer)
        after = state.update(answer=answer, released=answer, answer_source="conversation")
        return StageResult(after, "ok", f"{request.intent.value}: answered from the conversation, no model call")


class Generate(Stage):
    """The answer to the user's original words; abstains when retrieval found nothing relevant. With the answer
    check in ``drop`` mode the stream passes through the check, unit by unit."""

    name = "generate"

    def __init__(
        self,
        settings: Settings,
        model: ChatModel,
        check: AnswerCheck | None = None,
        extractive: ExtractiveAnswerer | None = None,
    ) -> None:
        """``extractive``: what quotes the passages when an unchecked model gives no usable answer."""
        self.settings = settings
        self.model = model
        self.check = check
        self.extractive = extractive

    def applies(self, state: TurnState) -> bool:
        return not state.answer  # an earlier stage (extract) may have answered already

    def _options(self, state: TurnState) -> ChatOptions:
        request, settings = state.request, self.settings
        cap = settings.answer_max_tokens  # the request's cap, within the settings' (the budget reserved that much)
        max_tokens = cap if request.max_tokens is None else max(1, min(request.max_tokens, cap))
        temperature = settings.answer_temperature if request.temperature is None else request.temperature
        return ChatOptions(temperature=temperature, max_tokens=max_tokens, stop=ANSWER_STOP)

    async def run(self, state: TurnState) -> StageResult:
        if state.abstain:
            emit(state.deltas, ABSTAIN)
            detail = "abstained: no passage passed the relevance thresholds"
            after = state.update(answer=ABSTAIN, answer_source="abstain", released=ABSTAIN)
            return StageResult(after, "skipped", detail)
        assert state.prompt is not None
        plan = state.prompt
        passages = plan.passages if state.retrieves else None
        messages = build_messages(
            self.settings.system_prompt,
            plan.history,
            passages,
            state.question,
            plan.summary,
            self.settings.prompt_layout,
            memories=plan.memories,
            profile=state.profile,
            history_excerpts=plan.history_excerpts,
        )
        release = self.check.release(state) if self.check is not None and self.check.releases(state) else None
        generation = await generate(self.model, messages, self._options(state), release or state.deltas)
        answer, guard = generation.answer, generation.guard
        released = release.flush() if release is not None else (answer if state.deltas is not None else "")
        calls = state.called("answer", usage=generation.usage, first_token_ms=generation.first_token_ms)
        state = state.update(calls=calls, answer=answer, released=released)
        if not answer and release is None:  # unchecked: quote the passages rather than say nothing
            quoted = await self.extractive.answer_turn(state) if self.extractive is not None else None
            answer = quoted.text if quoted is not None else NO_ANSWER
            emit(state.deltas, answer)
            note = "model gave no usable answer: quoted the best passages instead"
            return StageResult(state.update(answer=answer, answer_source="extractive", released=answer), "ok", note)
        detail = "stopped the model repeating itself or echoing the prompt" if guard.tripped else ""
        return StageResult(state, "ok", detail)


class Cite(Stage):
    """The passages the answer used: those that support its kept units (the answer check), else the ids the model
    cited, else attribution by wording."""

    name = "cite"

    async def run(self, state: TurnState) -> StageResult:
        shown = [*state.prompt.passages, *state.prompt.memories] if state.prompt else []
        shown += [p for p in state.selected if p not in shown]  # quoted from the page beyond the prompt's passages
        if state.support and state.answer_source == "model":  # checked: each kept unit names its passage
            by_id = {p.id: p for p in shown}
            ids = dict.fromkeys(v.passage_id for v in state.support if v.kept and v.passage_id in by_id)
            citations = [
                Citation(id=i, source=by_id[i].source, heading=by_id[i].heading, how="supported") for i in ids if i
            ]
        else:
            citations = extract_citations(state.answer, shown)
        return StageResult(state.update(citations=tuple(citations)), "ok", f"{len(citations)} cited")
