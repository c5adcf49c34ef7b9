"""The turn's stages, in order: route, query, skip gate, retrieve, select, coverage | budget | converse, answer,
cite (the memory stages are in :mod:`anaphora.pipeline.memory`).

Each is a small :class:`~anaphora.pipeline.stage.Stage` that declares the fields it reads and writes, and returns
the new values of those it changes, nothing else. Route to select are the retrieval phase (what evaluation
replays); the budget is the prompt phase; converse (extractive mode), the answer stage
(:mod:`anaphora.pipeline.answer`) and cite are the answer phase. Optional stages (query, skip gate, select,
coverage) declare the fallback they degrade to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from anaphora.answering.citations import extract_citations
from anaphora.answering.conversation_answers import answer_about_conversation
from anaphora.answering.select import PassageSelector
from anaphora.pipeline.answer import NO_ANSWER, NOT_TOLD
from anaphora.pipeline.budget import PromptBudget, PromptLimits, PromptParts
from anaphora.pipeline.check import NOT_COVERED
from anaphora.pipeline.prompt import (
    CONTEXT_FRAMING,
    MEMORY_FRAMING,
    QUESTION_LABEL,
    summary_label,
    system_text,
)
from anaphora.pipeline.query import QueryPlan, QueryStage
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import Changes, Skip, TurnRequest, TurnState
from anaphora.pipeline.window import ConversationWindow, WindowPolicy
from anaphora.reading.coverage import not_covered
from anaphora.reading.intents import ConversationRequest, Intent
from anaphora.reading.message import Reading, read
from anaphora.reading.personal import ACKNOWLEDGED
from anaphora.reading.route import Route, TurnKind, history_covers, route_turn
from anaphora.retrieval.base import Retriever
from anaphora.retrieval.entity_boost import boost, conversation_entities
from anaphora.retrieval.terms import TermStatistics
from anaphora.text import named_union
from anaphora.types import Citation, Message


def said_request(reading: Reading, history: Sequence[Message]) -> ConversationRequest | None:
    """The request about the conversation this turn makes, judged against what the conversation said, or ``None``
    (the documents). A request the words alone make ("paste the permissions command again") counts when an answer
    said a word of its topic, or it names none (a request naming nothing asks of all of it; a recap asks of all of
    it whatever it adds, "tl;dr of this thread for the ticket"). One the form makes but whose words name a topic
    (``tentative``: "in one line: what goes in mise.toml for the venv bit?") counts when the conversation, either
    side of it, said at least half of that topic's words: then it asks for what was said, not a new search. The
    words said include those identifiers are made of ("the permissions command" names ``set_permissions``)."""
    request = reading.request or reading.request_if_said
    if request is None or request.intent is Intent.CHIT_CHAT or not history:
        return None
    if request.tentative:
        said = named_union(m.content for m in history)
        return replace(request, tentative=False) if 2 * len(request.topic & said) >= len(request.topic) else None
    if not request.topic or request.intent is Intent.RECAP:
        return request
    said = named_union(m.content for m in history if m.role == "assistant")
    return request if request.topic & said else None


class Router(Stage):
    """The one stage that decides the route, before any model call: deterministic rules (chit-chat, requests about
    the conversation, turn 1), completed by the standalone test. Turns the rules send away from the documents skip
    retrieval (with ``skip_gate``); a model's analysis, later, only proposes a skip (:class:`SkipGate`)."""

    name = "route"
    reads = ("question", "history")
    writes = ("reading", "route", "skip")
    retrieval = True

    def __init__(self, *, skip_gate: bool) -> None:
        self.skip_gate = skip_gate

    async def run(self, state: TurnState) -> StageResult:
        reading = read(state.question)
        route = route_turn(reading, bool(state.history))
        request = said_request(reading, state.history)
        if route.kind is TurnKind.META and request is None:
            route = Route(TurnKind.FOLLOW_UP, "about the conversation, but nothing said names what it asks: searched")
        elif route.kind is not TurnKind.META and request is not None:
            reading = replace(reading, request=request)
            route = Route(TurnKind.META, "asks for what the conversation said: answered from the history")
        skip = Skip(route.kind, route.reason) if not route.needs_retrieval and self.skip_gate else None
        return StageResult({"reading": reading, "route": route, "skip": skip}, "ok", route.reason)


class QueryPlanner(Stage):
    """What the retriever is asked: a query strategy's plan (a guarded rewrite, an expansion, the bare message).
    A strategy that calls the model may fail or time out; the plan then falls back to the model-free expansion.
    The plan may carry a model analysis's view of the turn (:attr:`~anaphora.pipeline.query.QueryPlan.
    proposes_skip`); the route is the router's."""

    name = "query"
    reads = ("question", "history", "skip", "calls")
    writes = ("plan", "calls")
    retrieval = True

    def __init__(self, strategy: QueryStage, *, timeout_s: float | None = None) -> None:
        self.strategy = strategy
        self.budget_s = timeout_s  # kept for a strategy swapped in later (Engine.query_stage)
        self.timeout_s = timeout_s if strategy.calls_model else None
        self.counter = "rewriter" if strategy.calls_model else None

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    def _planned(self, state: TurnState, plan: QueryPlan) -> Changes:
        return {"plan": plan, "calls": state.called("rewrite", plan.model_calls, plan.usage)}

    async def run(self, state: TurnState) -> StageResult:
        plan = await self.strategy.run(state.question, state.history)
        detail = plan.detail + (f"; the analysis says {plan.proposed_kind}" if plan.proposed_kind else "")
        return StageResult(self._planned(state, plan), plan.status, detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        plan = replace(self.strategy.fallback_plan(state.question, state.history), model_calls=1)
        return self._planned(state, plan), f"fallback: {plan.source}"


class SkipGate(Stage):
    """Skips retrieval when the conversation already holds the answer. The model's "already answered" (or "not
    about the documents", :attr:`~anaphora.pipeline.query.QueryPlan.proposes_skip`) is trusted only when the
    message brings no word the conversation has not seen: a wrong skip costs recall, a wrong retrieval costs
    milliseconds. It decides the skip, never the route."""

    name = "skip_gate"
    reads = ("question", "history", "plan", "route", "skip")
    writes = ("skip",)
    retrieval = True

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.history)

    async def run(self, state: TurnState) -> StageResult:
        plan, route = state.plan, state.route
        assert plan is not None and route is not None  # the router and the query stage ran before
        routed_away = not route.needs_retrieval  # the router's rules (the router itself skips when the gate is on)
        proposed = routed_away or plan.proposes_skip
        if not (proposed and history_covers(state.question, [m.content for m in state.history])):
            return StageResult({}, "ok", "retrieval needed")
        said_by = route.reason if routed_away or plan.proposed_kind is None else "model analysis"
        skip = Skip("answered_by_conversation", f"{said_by}: the conversation holds the answer")
        return StageResult({"skip": skip}, "ok", "retrieval skipped")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "retrieval kept"


class Retrieve(Stage):
    """The hybrid first stage over every query of the plan, fused."""

    name = "retrieve"
    reads = ("question", "plan", "skip")
    writes = ("candidates", "query_weights")
    retrieval = True

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    async def run(self, state: TurnState) -> StageResult:
        assert state.plan is not None  # the query stage ran (or fell back) before
        candidates = await self.retriever.run_many(state.plan.queries, message=state.question)
        changes = {"candidates": tuple(candidates), "query_weights": candidates.weights}
        return StageResult(changes, "ok", f"{len(candidates)} candidates")


class BoostEntities(Stage):
    """Candidates that mention the conversation's named things move up, damped (:mod:`~anaphora.retrieval.
    entity_boost`); optional: a failure keeps the first stage's order."""

    name = "entity_boost"
    reads = ("question", "history", "skip", "candidates")
    writes = ("candidates",)
    retrieval = True

    def __init__(self, statistics: Callable[[], TermStatistics | None], strength: float) -> None:
        self.statistics = statistics
        self.strength = strength

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.candidates)

    async def run(self, state: TurnState) -> StageResult:
        entities = conversation_entities(state.question, state.history, self.statistics())
        if not entities:
            return StageResult({}, "skipped", "no named thing rare in this corpus")
        boosted = boost(state.candidates, entities, self.strength)
        names = ", ".join(e.name for e in entities[:8])
        return StageResult({"candidates": tuple(boosted)}, "ok", f"entities: {names}")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "first-stage order"


class Select(Stage):
    """Rerank, apply the thresholds, keep the top k; nothing left (and no memory) means the turn abstains."""

    name = "select"
    reads = ("plan", "question", "skip", "candidates")
    writes = ("candidates", "selected")
    retrieval = True
    counter = "reranker"

    def __init__(self, selector: PassageSelector, *, top_k: int) -> None:
        self.selector = selector
        self.top_k = top_k
        # the null reranker answers at once: no budget to keep, and no timeout scope entered on every turn
        self.timeout_s = selector.timeout_s if selector.reranker.calls_model else None

    def applies(self, state: TurnState) -> bool:
        return state.retrieves

    def _selected(self, passages: list) -> Changes:
        return {"candidates": tuple(passages), "selected": tuple(passages[: self.top_k])}

    async def run(self, state: TurnState) -> StageResult:
        assert state.plan is not None
        selection = await self.selector.run(state.plan.query, state.candidates, state.question)
        return StageResult(self._selected(selection.passages), selection.status, selection.detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        query = state.plan.query if state.plan else state.question
        chosen = self.selector.first_stage(state.candidates, query, state.question)
        return self._selected(chosen.passages), "first-stage order"


class CheckCoverage(Stage):
    """Refuses a question about something no passage mentions (:mod:`~anaphora.reading.coverage`): the selection
    is emptied, so the turn abstains (``nothing_found``) instead of quoting passages about something else, unless
    the user's memory names it (``uncovered``: what memory recall then asks of a memory). Optional: a failure keeps
    the selection."""

    name = "coverage"
    reads = ("question", "skip", "candidates", "selected")
    writes = ("selected", "uncovered")

    def __init__(self, statistics: Callable[[], TermStatistics | None], close: float) -> None:
        self.statistics = statistics
        self.close = close

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and bool(state.selected)

    async def run(self, state: TurnState) -> StageResult:
        missing = not_covered(state.question, state.candidates, self.statistics(), close=self.close)
        if not missing:
            return StageResult({}, "ok", "every word the question names is in the corpus")
        detail = f"no passage mentions {', '.join(missing[:5])}: nothing selected"
        # nothing found (the answer stage abstains), unless a memory names what the documents do not
        return StageResult({"selected": (), "uncovered": tuple(missing)}, "ok", detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "selection kept"


class Budget(Stage):
    """The prompt phase: one token budget for the whole prompt (see :mod:`anaphora.pipeline.budget`), over the
    turn's :class:`~anaphora.pipeline.window.ConversationWindow` under the window policy."""

    name = "budget"
    reads = ("question", "history", "window", "summary", "skip", "selected", "memory", "profile")
    writes = ("prompt",)

    def __init__(self, budget: PromptBudget, limits: PromptLimits, window: WindowPolicy, system_prompt: str) -> None:
        self.budget = budget
        self.limits = limits
        self.window = window
        self.system_prompt = system_prompt

    async def run(self, state: TurnState) -> StageResult:
        layout = self.window.layout
        parts = PromptParts(
            system=system_text(self.system_prompt, state.profile),
            question=state.question,
            passages=state.selected,
            summary=state.summary,
            framing=CONTEXT_FRAMING if state.retrieves else "",
            summary_label=summary_label(layout),
            memories=state.memory_passages,
            memory_framing=MEMORY_FRAMING + ("" if state.retrieves else QUESTION_LABEL),
        )
        window = (state.window or ConversationWindow()).for_budget(state.history, self.window)
        plan = self.budget.plan(parts, self.limits, window)
        decision = plan.decision
        detail = f"{decision.used}/{decision.budget} tokens, {decision.turns_kept} turns"
        if decision.turns_folded:
            folded = decision.turns_folded
            detail += f", {folded} older turn{'s' if folded > 1 else ''} left the window for the summary"
        return StageResult({"prompt": plan}, "ok", detail)


SaidReader = Callable[[TurnRequest], Awaitable[tuple[Message, ...]]]
"""The earlier turns of a turn's conversation, read back further than the prompt's window
(:func:`~anaphora.pipeline.engine.said_reader`)."""


class AnswerFromConversation(Stage):
    """``answer_mode = "extractive"``: chit-chat and requests about the conversation (shorten, repeat, point back,
    recap) answered from the history by :mod:`~anaphora.answering.conversation_answers`: no retrieval, no model
    call. (With a capable model the generator answers them from the history it is shown.)"""

    name = "converse"
    reads = ("reading", "request", "history", "turns_before", "route", "skip", "answer")
    writes = ("answer", "answer_source")

    def __init__(self, read_back: SaidReader | None = None) -> None:
        """``read_back``: the conversation's earlier turns beyond the prompt's window (``None``: the window only),
        so that "recap everything" or "what was the first command you gave me?" after more turns than the window
        holds starts from the first turn."""
        self.read_back = read_back

    def applies(self, state: TurnState) -> bool:
        kinds = (TurnKind.CHIT_CHAT, TurnKind.META)
        return not state.retrieves and state.route is not None and state.route.kind in kinds and not state.answer

    async def run(self, state: TurnState) -> StageResult:
        request = state.reading.request if state.reading is not None else None
        if request is None:
            return StageResult({}, "skipped", "left to the model")
        said = state.history
        if self.read_back is not None and 2 * state.turns_before > len(said):  # the window does not hold them all
            said = await self.read_back(state.request)
        answer = answer_about_conversation(request, said, (NOT_COVERED, NO_ANSWER, NOT_TOLD, ACKNOWLEDGED))
        changes = {"answer": answer, "answer_source": "conversation"}
        return StageResult(changes, "ok", f"{request.intent.value}: answered from the conversation, no model call")


class Cite(Stage):
    """The passages the answer used: those that support its kept units (the answer check), else the ids the model
    cited, else attribution by wording."""

    name = "cite"
    reads = ("prompt", "selected", "support", "answer", "answer_source")
    writes = ("citations",)

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
        return StageResult({"citations": tuple(citations)}, "ok", f"{len(citations)} cited")


class LinkCitations(Stage):
    """After cite: each citation gets its published URL (optional: a failure leaves the citations as they were)."""

    name = "link_citations"
    reads = ("citations",)
    writes = ("citations",)
    timeout_s = 2.0

    def __init__(self, links: Callable[[Sequence[Citation]], list[Citation]]) -> None:
        self.links = links

    def applies(self, state: TurnState) -> bool:
        return bool(state.citations)

    async def run(self, state: TurnState) -> StageResult:
        linked = await asyncio.to_thread(self.links, state.citations)
        count = sum(1 for c in linked if c.url)
        return StageResult({"citations": tuple(linked)}, "ok", f"{count} of {len(linked)} linked")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "citations without URLs"
