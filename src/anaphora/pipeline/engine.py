"""The turn pipeline's async core.

sanitize -> query (rewrite for retrieval only) -> retrieve -> select -> prompt -> generate -> cite -> remember

The generator always answers the user's original words; the retrieval query lives only in the trace.
A turn runs in its own task: a streaming caller that stops reading does not stop the turn from being stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from anaphora.errors import InputError
from anaphora.metrics import Metrics
from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.answer_guard import ANSWER_STOP, extractive_answer
from anaphora.pipeline.budget import PromptPlan, plan_prompt
from anaphora.pipeline.citations import extract_citations
from anaphora.pipeline.generate import Deltas, emit, generate
from anaphora.pipeline.prompt import CONTEXT_FRAMING, SUMMARY_LABEL, build_messages, format_passage
from anaphora.pipeline.query import QueryStage
from anaphora.pipeline.route import Route, TurnKind, history_covers, route_by_rules, route_by_standalone_test
from anaphora.pipeline.select import PassageSelector
from anaphora.pipeline.summary import RollingSummarizer
from anaphora.pipeline.trace import timed
from anaphora.rerank.base import NoModelReranker
from anaphora.retrieval.hybrid import HybridRetriever
from anaphora.sanitize import sanitize
from anaphora.settings import Settings
from anaphora.store.protocols import ConversationStore, StoredTurn, SummaryStore
from anaphora.types import Message, Passage, TurnResult, TurnTrace

LOCAL_USER = "local"
NO_ANSWER = "I could not find this in the documents."
ABSTAIN = "The documents do not cover this: none of the passages I found is relevant enough to answer from."


def turns_to_messages(turns: Sequence[StoredTurn]) -> list[Message]:
    messages: list[Message] = []
    for turn in turns:
        messages.append(Message(role="user", content=turn.question))
        messages.append(Message(role="assistant", content=turn.answer))
    return messages


@dataclass
class TurnRequest:
    question: str
    user_id: str = LOCAL_USER
    conversation_id: str | None = None
    history: Sequence[Message] | None = None  # stateless mode: the caller sends the history
    temperature: float | None = None  # per-request answer options; None: the settings decide
    max_tokens: int | None = None


class TurnStream:
    """Text deltas as they are generated, then :meth:`result`. Reading the deltas is optional."""

    def __init__(self, task: asyncio.Task[TurnResult], deltas: asyncio.Queue[str | None]) -> None:
        self._task = task
        self._deltas = deltas

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        while True:
            getter = asyncio.ensure_future(self._deltas.get())
            done, _ = await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                while not self._deltas.empty():  # the task finished: drain what it left
                    delta = self._deltas.get_nowait()
                    if delta is None:
                        return
                    yield delta
                self._task.result()  # re-raise the turn's error, if any
                return
            delta = getter.result()
            if delta is None:
                return
            yield delta

    async def result(self) -> TurnResult:
        return await self._task


class Engine:
    """Runs turns. Every dependency is passed in; :func:`anaphora.app.build_components` wires the defaults."""

    def __init__(
        self,
        settings: Settings,
        *,
        chat_model: ChatModel,
        retriever: HybridRetriever,
        conversations: ConversationStore,
        query_stage: QueryStage,
        selector: PassageSelector | None = None,
        summaries: SummaryStore | None = None,
        summarizer: RollingSummarizer | None = None,
        metrics: Metrics | None = None,
        tracer: Any | None = None,
    ) -> None:
        """``tracer``: an OpenTelemetry tracer for spans per turn and stage (None: no spans)."""
        self.settings = settings
        self.chat_model = chat_model
        self.retriever = retriever
        self.conversations = conversations
        self.query_stage = query_stage
        self.metrics = metrics or Metrics()
        self.selector = selector or PassageSelector(
            NoModelReranker(), similarity_threshold=settings.similarity_threshold, metrics=self.metrics
        )
        self.summaries = summaries
        self.summarizer = summarizer
        self.tracer = tracer
        self._background: set[asyncio.Task] = set()

    async def ask(self, request: TurnRequest) -> TurnResult:
        """Run one turn to completion (no streaming)."""
        return await self._run(request, None)

    def stream(self, request: TurnRequest) -> TurnStream:
        """Start one turn in its own task and stream its answer; the turn completes even if nobody reads."""
        deltas: asyncio.Queue[str | None] = asyncio.Queue()
        task = asyncio.get_running_loop().create_task(self._run(request, deltas))
        return TurnStream(task, deltas)

    async def drain(self) -> None:
        """Wait for background work (summary updates) to finish; call before shutting down."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def aclose(self) -> None:
        """Finish background work and close the network clients of the model, the reranker and the conversation
        store, if any."""
        await self.drain()
        for part in (self.chat_model, self.selector.reranker, self.conversations):
            close = getattr(part, "aclose", None)
            if close is not None:
                await close()

    async def retrieve(
        self, question: str, history: Sequence[Message], query_stage: QueryStage | None = None
    ) -> tuple[list[Passage], TurnTrace]:
        """The retrieval half of a turn, without generation: returns all ranked candidates and the trace, whose
        ``retrieved`` holds the passages selected for the prompt.

        ``question`` and ``history`` must already be sanitised. Evaluation calls this directly, optionally with
        another ``query_stage`` (a baseline), so that what is measured is exactly what a turn does.
        """
        trace = TurnTrace(question=question)
        with timed(trace, "route", self.tracer) as stage:
            route = route_by_rules(question, bool(history))
            stage.set("ok", route.reason if route else "rules undecided")
        if route and not route.needs_retrieval and self.settings.skip_gate:
            trace.route, trace.route_reason, trace.retrieval_skipped = route.kind, route.reason, True
            self.metrics.retrievals_skipped.labels(reason=route.kind).inc()
            return [], trace

        with timed(trace, "query", self.tracer) as stage:
            plan = await (query_stage or self.query_stage).run(question, history)
            stage.set(plan.status, plan.detail)
        if route is None and plan.kind:
            route = Route(TurnKind(plan.kind), plan.kind not in ("chit_chat", "meta"), "model analysis", "model")
        route = route or route_by_standalone_test(question)  # the rules already ran above
        trace.route, trace.route_reason = route.kind, route.reason
        if self.settings.skip_gate and self._answered_by_history(plan, route, question, history):
            trace.retrieval_skipped, trace.route_reason = True, f"{route.reason}: the conversation holds the answer"
            trace.model_calls += plan.model_calls
            self.metrics.retrievals_skipped.labels(reason="answered_by_conversation").inc()
            return [], trace
        trace.query, trace.query_source = plan.query, plan.source
        trace.alternate_queries = [q for q in plan.queries if q != plan.query]
        trace.model_calls += plan.model_calls

        with timed(trace, "retrieve", self.tracer) as stage:
            candidates = await self.retriever.run_many(plan.queries)
            stage.set("ok", f"{len(candidates)} candidates")
        with timed(trace, "select", self.tracer) as stage:
            selection = await self.selector.run(plan.query, candidates)
            stage.set(selection.status, selection.detail)
        trace.retrieved = selection.passages[: self.settings.top_k]
        return selection.passages, trace

    @staticmethod
    def _answered_by_history(plan, route: Route, question: str, history: Sequence[Message]) -> bool:
        """Trust the model's "already answered" or "not about the documents" only when the message brings no
        word the conversation has not seen: a wrong skip costs recall, a wrong retrieval costs milliseconds."""
        says_so = plan.answered_by_conversation or not route.needs_retrieval
        return says_so and history_covers(question, [m.content for m in history])

    async def _context(self, request: TurnRequest) -> tuple[list[Message], str, int]:
        """(recent history as messages, current summary, number of earlier turns) - all sanitised."""
        if request.history is not None:
            history = [m for m in request.history if m.role in ("user", "assistant")]
            turns_before = sum(1 for m in history if m.role == "user")
            summary = ""
        elif request.conversation_id is None:
            return [], "", 0
        else:
            conversation = await self.conversations.get(request.user_id, request.conversation_id)
            stored = await self.conversations.turns(
                request.user_id, request.conversation_id, last=self.settings.history_turns
            )
            history, turns_before = turns_to_messages(stored), conversation.turn_count
            use_summary = self.settings.summary and self.summaries is not None
            current = await self.summaries.summary(request.user_id, request.conversation_id) if use_summary else None
            summary = current.text if current else ""
        return [Message(role=m.role, content=sanitize(m.content)) for m in history], sanitize(summary), turns_before

    @staticmethod
    def _pick(requested: float | None, default: float) -> float:
        return default if requested is None else requested

    def _answer_tokens(self, request: TurnRequest) -> int:
        """The answer's token cap: the request's, within the settings' (the budget reserved that much)."""
        cap = self.settings.answer_max_tokens
        return cap if request.max_tokens is None else max(1, min(request.max_tokens, cap))

    def _plan(
        self, question: str, history: list[Message], summary: str, passages: list[Passage], *, framed: bool
    ) -> PromptPlan:
        settings = self.settings
        return plan_prompt(
            count=self.chat_model.count_tokens,
            budget=settings.context_window - settings.answer_max_tokens,
            history_budget=settings.history_budget_tokens,
            max_turns=settings.history_turns,
            system=settings.system_prompt,
            summary=summary,
            history=history,
            passages=passages,
            question=question,
            passage_text=format_passage,
            framing=CONTEXT_FRAMING if framed else "",
            summary_label=SUMMARY_LABEL,
        )

    async def _run(self, request: TurnRequest, deltas: Deltas | None) -> TurnResult:
        span_context = self.tracer.start_as_current_span("anaphora.turn") if self.tracer else nullcontext()
        with span_context as span:
            try:
                result = await self._turn(request, deltas)
            finally:
                emit(deltas, None)
            if span is not None:
                trace = result.trace
                span.set_attribute("anaphora.route", trace.route or "")
                span.set_attribute("anaphora.retrieval_skipped", trace.retrieval_skipped)
                span.set_attribute("anaphora.model_calls", trace.model_calls)
                span.set_attribute("anaphora.prompt_tokens", trace.prompt_tokens)
            return result

    async def _turn(self, request: TurnRequest, deltas: Deltas | None) -> TurnResult:
        question = sanitize(request.question).strip()
        if not question:
            raise InputError("the question is empty", hint="type a question")
        history, summary, turns_before = await self._context(request)
        _, trace = await self.retrieve(question, history)
        retrieved = not trace.retrieval_skipped

        with timed(trace, "budget", self.tracer) as stage:
            plan = self._plan(question, history, summary, trace.retrieved, framed=retrieved)
            trace.budget, passages = plan.decision, plan.passages
            stage.set("ok", f"{plan.decision.used}/{plan.decision.budget} tokens, {plan.decision.turns_kept} turns")
        with timed(trace, "generate", self.tracer) as stage:
            if retrieved and not trace.retrieved:
                answer, trace.abstained = ABSTAIN, True  # nothing relevant: say so rather than guess
                self.metrics.abstentions.inc()
                stage.set("skipped", "abstained: no passage passed the relevance thresholds")
                emit(deltas, answer)
            else:
                messages = build_messages(
                    self.settings.system_prompt, plan.history, passages if retrieved else None, question, plan.summary
                )
                options = ChatOptions(
                    temperature=self._pick(request.temperature, self.settings.answer_temperature),
                    max_tokens=self._answer_tokens(request),
                    stop=ANSWER_STOP,
                )
                answer, guard = await generate(self.chat_model, messages, options, deltas)
                trace.model_calls += 1
                if not answer:
                    answer = extractive_answer(question, passages) or NO_ANSWER
                    stage.set("ok", "model gave no usable answer: quoted the best passages instead")
                    emit(deltas, answer)
                elif guard.tripped:
                    stage.set("ok", "stopped the model repeating itself or echoing the prompt")
        trace.prompt_tokens = plan.decision.used
        citations = extract_citations(answer, passages)

        turn_index = turns_before
        if request.conversation_id is not None:
            started = time.perf_counter()  # timed outside the trace, which is stored as it is now
            stored = await self.conversations.append_turn(
                request.user_id, request.conversation_id, request.question, answer, citations, trace
            )
            self.metrics.stage_seconds.labels(stage="remember").observe(time.perf_counter() - started)
            turn_index = stored.index
            # turns the next prompt will not show verbatim: beyond the window, or evicted by the budget just now
            covers = max(turns_before + 1 - self.settings.history_turns, turns_before - plan.decision.turns_kept)
            self._schedule_summary(request, covers)
        self._observe(trace)
        return TurnResult(
            conversation_id=request.conversation_id or "",
            turn_index=turn_index,
            question=request.question,
            answer=answer,
            citations=citations,
            trace=trace,
        )

    def _schedule_summary(self, request: TurnRequest, covers: int) -> None:
        """Summarise turns that will not be shown verbatim any more, after the answer, without blocking it."""
        if not (self.settings.summary and self.summarizer and covers > 0):
            return
        task = asyncio.get_running_loop().create_task(
            self.summarizer.update(request.user_id, request.conversation_id or "", covers)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _observe(self, trace: TurnTrace) -> None:
        metrics = self.metrics
        metrics.turns.inc()
        for stage in trace.stages:
            metrics.stage_seconds.labels(stage=stage.name).observe(stage.ms / 1000)
        if trace.route:
            metrics.routes.labels(kind=trace.route).inc()
        if not trace.abstained:
            metrics.model_calls.labels(purpose="answer").inc()
        rewrite_calls = trace.model_calls - (0 if trace.abstained else 1)
        if rewrite_calls > 0:
            metrics.model_calls.labels(purpose="rewrite").inc(rewrite_calls)
        metrics.prompt_tokens.observe(trace.prompt_tokens)
        if trace.budget:
            metrics.budget_evictions.inc(trace.budget.turns_evicted_for_budget)
