"""The turn pipeline's async core: a sequence of stages over one frozen turn state.

route -> query (rewrite for retrieval only) -> skip gate -> retrieve -> select -> budget -> generate -> cite,
then the turn is stored and the rolling summary scheduled. The generator always answers the user's original
words; the retrieval query lives only in the trace. A turn runs in its own task: a streaming caller that stops
reading does not stop the turn from being stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from anaphora.errors import InputError
from anaphora.metrics import Metrics
from anaphora.models.base import ChatModel
from anaphora.pipeline.budget import window_start
from anaphora.pipeline.check import AnswerCheck, Extract
from anaphora.pipeline.extractive import ExtractiveAnswerer
from anaphora.pipeline.generate import emit
from anaphora.pipeline.memory import RecallMemory, RememberTurn
from anaphora.pipeline.observer import StageObserver
from anaphora.pipeline.query import QueryStage
from anaphora.pipeline.select import PassageSelector
from anaphora.pipeline.stage import Stage
from anaphora.pipeline.stages import (
    ABSTAIN,
    NO_ANSWER,
    AnswerFromConversation,
    BoostEntities,
    Budget,
    CheckCoverage,
    Cite,
    Generate,
    QueryPlanner,
    Retrieve,
    Router,
    Select,
    SkipGate,
)
from anaphora.pipeline.state import LOCAL_USER, Deltas, TurnRequest, TurnState
from anaphora.pipeline.summary import RollingSummarizer
from anaphora.rerank.base import NoModelReranker
from anaphora.retrieval.base import Retriever
from anaphora.retrieval.terms import TermStatistics
from anaphora.sanitize import sanitize
from anaphora.settings import Settings
from anaphora.store.protocols import ConversationStore, StoredTurn, SummaryStore
from anaphora.types import Message, Passage, StageRecord, TurnResult, TurnTrace

__all__ = ["ABSTAIN", "LOCAL_USER", "NO_ANSWER", "Engine", "TurnRequest", "TurnStream", "turns_to_messages"]


def shown_passages(turn: StoredTurn) -> tuple[Passage, ...]:
    """The passages a stored turn's prompt showed (its trace's selection, as far as the budget kept it)."""
    trace = turn.trace
    if trace is None or trace.retrieval_skipped or trace.abstained or trace.budget is None:
        return ()
    return tuple(trace.retrieved[: trace.budget.passages_kept])


def previous_window_start(turns: Sequence[StoredTurn]) -> int | None:
    """Index of the oldest turn the previous turn's prompt showed verbatim (None when no turn or budget is known)."""
    last = turns[-1] if turns else None
    if last is None or last.trace is None or last.trace.budget is None:
        return None
    return max(0, last.index - last.trace.budget.turns_kept)


def turns_to_messages(turns: Sequence[StoredTurn]) -> list[Message]:
    messages: list[Message] = []
    for turn in turns:
        messages.append(Message(role="user", content=turn.question))
        messages.append(Message(role="assistant", content=turn.answer))
    return messages


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


def trace_of(state: TurnState, records: list[StageRecord]) -> TurnTrace:
    """The turn's audit record, written once from the final state."""
    route, plan, skip = state.route, state.plan, state.skip
    trace = TurnTrace(
        question=state.question,
        route=route.kind if route else None,
        route_reason=skip.why if skip else (route.reason if route else ""),
        retrieval_skipped=skip is not None,
        abstained=state.abstain,
        retrieved=list(state.selected),
        stages=records,
        model_calls=len(state.calls),
        calls=list(state.calls),
        prompt_tokens=state.prompt.decision.used if state.prompt else 0,
        budget=state.prompt.decision if state.prompt else None,
        answer_source=state.answer_source,
        support=list(state.support),
        memory=list(state.memory),
    )
    if plan is not None and skip is None:
        trace.query, trace.query_source = plan.query, plan.source
        trace.alternate_queries = [q for q in plan.queries if q != plan.query]
    return trace


class Engine:
    """Runs turns through ``stages``. Every dependency is passed in; :func:`anaphora.app.build_components` wires
    the defaults. The engine knows the order of the stages, not what they do."""

    def __init__(
        self,
        settings: Settings,
        *,
        chat_model: ChatModel,
        retriever: Retriever,
        conversations: ConversationStore,
        query_stage: QueryStage,
        selector: PassageSelector | None = None,
        summaries: SummaryStore | None = None,
        summarizer: RollingSummarizer | None = None,
        metrics: Metrics | None = None,
        tracer: Any | None = None,
        extractive: ExtractiveAnswerer | None = None,
        term_statistics: Callable[[], TermStatistics | None] | None = None,
        memory_recall: RecallMemory | None = None,
        memory_writer: RememberTurn | None = None,
    ) -> None:
        """``tracer``: an OpenTelemetry tracer for spans per turn and stage (None: no spans); ``extractive``: the
        answerer that quotes passages (``answer_mode`` 'extractive' and 'auto'; without it 'auto' abstains);
        ``term_statistics``: the passage index's document frequencies, which the entity boost reads;
        ``memory_recall``: the long-term memory stage, run before the budget; ``memory_writer``: the stage that
        remembers each stored turn, run after the answer in the background (None: no long-term memory)."""
        self.settings = settings
        self._shows_history_excerpts = settings.shows_history_excerpts  # decided once: it may read entry points
        self.chat_model = chat_model
        self.conversations = conversations
        self.metrics = metrics or Metrics()
        self.selector = selector or PassageSelector(
            NoModelReranker(), similarity_threshold=settings.similarity_threshold
        )
        self.summaries = summaries
        self.summarizer = summarizer
        self.observer = StageObserver(self.metrics, tracer)
        self.stages: list[Stage] = [
            Router(skip_gate=settings.skip_gate),
            QueryPlanner(query_stage, timeout_s=settings.rewrite_timeout_s),
            *([SkipGate()] if settings.skip_gate else []),
            Retrieve(retriever),
            *self._boost_stages(settings, term_statistics),
            Select(self.selector, top_k=settings.top_k),
            *self._coverage_stages(settings, term_statistics),
            *([memory_recall] if memory_recall is not None else []),
            Budget(settings, chat_model),
            *self._answer_stages(settings, chat_model, extractive),
            Cite(),
        ]
        self.memory_writer = memory_writer
        self._background: set[asyncio.Task] = set()

    @staticmethod
    def _boost_stages(settings: Settings, statistics: Callable[[], TermStatistics | None] | None) -> list[Stage]:
        return [BoostEntities(statistics, settings.entity_boost)] if statistics and settings.entity_boost else []

    @staticmethod
    def _coverage_stages(settings: Settings, statistics: Callable[[], TermStatistics | None] | None) -> list[Stage]:
        if statistics is None or settings.uncovered_similarity <= 0:
            return []
        return [CheckCoverage(statistics, settings.uncovered_similarity)]

    @staticmethod
    def _answer_stages(settings: Settings, model: ChatModel, extractive: ExtractiveAnswerer | None) -> list[Stage]:
        """``extractive`` mode: converse (turns about the conversation) and extract (turns that retrieved) ->
        generate (what is not answered yet) -> check."""
        mode = settings.effective_answer_mode
        check = AnswerCheck(settings.answer_check, mode, settings.support_threshold, extractive)
        generate = Generate(settings, model, check if settings.answer_check == "drop" else None, extractive)
        quoting = [AnswerFromConversation(), Extract(extractive)] if mode == "extractive" and extractive else []
        return [*quoting, generate, check]

    def add_stage(self, stage: Stage, *, after: str) -> None:
        """Insert ``stage`` after the stage named ``after`` (e.g. ``"generate"``)."""
        names = [s.name for s in self.stages]
        if after not in names:
            raise ValueError(f"no stage named {after!r}; the stages are {', '.join(names)}")
        self.stages.insert(names.index(after) + 1, stage)

    @property
    def query_stage(self) -> QueryStage:
        """The query strategy of the query stage; assigning one replaces the stage (evaluation swaps baselines)."""
        return self._planner().strategy

    @query_stage.setter
    def query_stage(self, strategy: QueryStage) -> None:
        index = self.stages.index(self._planner())
        self.stages[index] = QueryPlanner(strategy, timeout_s=self.settings.rewrite_timeout_s)

    def _planner(self) -> QueryPlanner:
        return next(s for s in self.stages if isinstance(s, QueryPlanner))

    @property
    def tracer(self) -> Any | None:
        return self.observer.tracer

    @tracer.setter
    def tracer(self, tracer: Any | None) -> None:
        self.observer.tracer = tracer

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
        """Finish background work and close the network clients of the model, the reranker and the store."""
        await self.drain()
        await self.chat_model.aclose()
        await self.selector.reranker.aclose()
        await self.conversations.aclose()

    async def _run_stages(self, stages: Sequence[Stage], state: TurnState) -> tuple[TurnState, list[StageRecord]]:
        records: list[StageRecord] = []
        for stage in stages:
            state = await self.observer.run(stage, state, records)
        return state, records

    async def retrieve(
        self, question: str, history: Sequence[Message], query_stage: QueryStage | None = None
    ) -> tuple[list[Passage], TurnTrace]:
        """The retrieval half of a turn, without generation: returns all ranked candidates and the trace, whose
        ``retrieved`` holds the passages selected for the prompt.

        ``question`` and ``history`` must already be sanitised. Evaluation calls this directly, optionally with
        another ``query_stage`` (a baseline), so that what is measured is exactly what a turn does.
        """
        stages = [s for s in self.stages if s.retrieval]
        if query_stage is not None:
            stages = [QueryPlanner(query_stage) if isinstance(s, QueryPlanner) else s for s in stages]
        state = TurnState(question=question, request=TurnRequest(question), history=tuple(history))
        state, records = await self._run_stages(stages, state)
        return list(state.candidates), trace_of(state, records)

    async def _start(self, request: TurnRequest, deltas: Deltas | None, turns_before: int) -> TurnState:
        """The turn's starting state: the sanitised question, recent history and current summary."""
        question = sanitize(request.question).strip()
        if not question:
            raise InputError("the question is empty", hint="type a question")
        summary, excerpts, previous_start, covers = "", (), None, 0
        if request.history is not None:
            history = [m for m in request.history if m.role in ("user", "assistant")]
        elif request.conversation_id is None:
            history = []
        else:
            stored = await self.conversations.turns(
                request.user_id, request.conversation_id, last=self.settings.history_turns
            )
            history = turns_to_messages(stored)
            if self.settings.prompt_layout == "cache_stable":
                previous_start = previous_window_start(stored)
                if self._shows_history_excerpts:  # each earlier turn is shown with its excerpts
                    excerpts = tuple(shown_passages(t) for t in stored)
            if self.settings.summary and self.summaries is not None:
                current = await self.summaries.summary(request.user_id, request.conversation_id)
                summary, covers = (current.text, current.covers_turns) if current else ("", 0)
        return TurnState(
            question=question,
            request=request,
            history=tuple(Message(role=m.role, content=sanitize(m.content)) for m in history),
            turns_before=turns_before,
            history_excerpts=excerpts,
            previous_window_start=previous_start,
            summary_covers=covers,
            summary=sanitize(summary),
            deltas=deltas,
        )

    async def _run(self, request: TurnRequest, deltas: Deltas | None) -> TurnResult:
        with self.observer.turn() as finish:
            try:
                result = await self._turn(request, deltas)
            finally:
                emit(deltas, None)
            finish(result.trace)
            return result

    async def _turn(self, request: TurnRequest, deltas: Deltas | None) -> TurnResult:
        if request.conversation_id is not None:  # an unknown conversation is refused before any work
            conversation = await self.conversations.get(request.user_id, request.conversation_id)
            turns_before = conversation.turn_count
        else:
            turns_before = sum(1 for m in request.history or () if m.role == "user")
        state, records = await self._run_stages(self.stages, await self._start(request, deltas, turns_before))
        trace = trace_of(state, records)
        citations = list(state.citations)

        turn_index = turns_before
        if request.conversation_id is not None:
            started = time.perf_counter()  # timed outside the trace, which is stored as it is now
            stored = await self.conversations.append_turn(
                request.user_id, request.conversation_id, request.question, state.answer, citations, trace
            )
            self.observer.seconds("remember", time.perf_counter() - started)
            turn_index = stored.index
            self._schedule_summary(request, self._summary_reach(state, turns_before))
            self._schedule_memory(state.update(turn_index=stored.index, turn_time=stored.created_at))
        self.observer.finish(trace, state.calls)
        return TurnResult(
            conversation_id=request.conversation_id or "",
            turn_index=turn_index,
            question=request.question,
            answer=state.answer,
            citations=citations,
            trace=trace,
        )

    def _summary_reach(self, state: TurnState, turns_before: int) -> int:
        """How many of the oldest turns the summary must cover for the next turn: those before the next turn's
        verbatim window (with 'cache_stable', a block boundary, so the summary changes only there), and those the
        budget evicted from this turn's prompt."""
        settings = self.settings
        decision = state.prompt.decision if state.prompt else None
        start = turns_before - decision.turns_kept if decision else turns_before  # this turn's window start
        next_start = window_start(
            turns_before + 1,
            layout=settings.prompt_layout,
            max_turns=settings.history_turns,
            min_turns=settings.history_min_turns,
            previous=start if settings.prompt_layout == "cache_stable" and decision else None,
        )
        return max(next_start, start + (decision.turns_to_fold_next if decision else 0))

    def _schedule_memory(self, state: TurnState) -> None:
        """Remember the stored turn after the answer, observed like every stage (fail-open, counted)."""
        if self.memory_writer is None:
            return
        task = asyncio.get_running_loop().create_task(self.observer.run(self.memory_writer, state, []))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _schedule_summary(self, request: TurnRequest, covers: int) -> None:
        """Summarise turns that will not be shown verbatim any more, after the answer, without blocking it."""
        summarizer = self.summarizer
        if not (self.settings.summary and summarizer and covers > 0):
            return
        work = summarizer.update(request.user_id, request.conversation_id or "", covers)
        task = asyncio.get_running_loop().create_task(
            self.observer.background("summary", "summarizer", work, summarizer.timeout_s)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
