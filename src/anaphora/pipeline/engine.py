"""The turn pipeline's async core: a sequence of stages over one frozen turn state, in three phases.

retrieval (route -> query (rewrite for retrieval only) -> skip gate -> retrieve -> select -> memory), prompt
(budget), answer (answer -> cite); then the turn is stored and the rolling summary and memory writing scheduled.
The generator always answers the user's original words; the retrieval query lives only in the trace. A turn runs in
its own task: a streaming caller that stops reading does not stop the turn from being stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from anaphora.embeddings.base import unpersisted_embeddings
from anaphora.errors import InputError
from anaphora.metrics import Metrics
from anaphora.pipeline.answer import NO_ANSWER
from anaphora.pipeline.check import ABSTAIN
from anaphora.pipeline.memory import RememberTurn
from anaphora.pipeline.observer import StageObserver
from anaphora.pipeline.sink import AnswerSink, Deltas
from anaphora.pipeline.stage import Stage, check_order
from anaphora.pipeline.state import INITIAL, LOCAL_USER, STORED, TurnRequest, TurnState
from anaphora.pipeline.summary import RollingSummarizer
from anaphora.pipeline.window import ConversationWindow, WindowPolicy
from anaphora.sanitize import sanitize
from anaphora.store.chains import history_before, write_turn
from anaphora.store.protocols import ConversationStore, NewTurn, StoredTurn, SummaryStore
from anaphora.types import Message, StageRecord, TurnResult, TurnTrace

__all__ = [
    "ABSTAIN",
    "LOCAL_USER",
    "NO_ANSWER",
    "Engine",
    "TurnRequest",
    "TurnStream",
    "run_stages",
    "said_reader",
    "turns_to_messages",
]


def turns_to_messages(turns: Sequence[StoredTurn]) -> list[Message]:
    messages: list[Message] = []
    for turn in turns:
        messages.append(Message(role="user", content=turn.question))
        messages.append(Message(role="assistant", content=turn.answer))
    return messages


# the earlier turns read for a request about the conversation ("what was the first command you gave me?", "recap
# everything"), beyond the prompt's window: a conversation longer than the window is still recapped from its start
SAID_TURNS = 40
READ_YOUR_WRITES_S = 2.0  # the longest a turn waits for the memory write of the same user's last turn


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
        abstained=state.abstained,
        retrieved=list(state.selected),
        stages=records,
        model_calls=len(state.calls),
        calls=list(state.calls),
        prompt_tokens=state.prompt.decision.used if state.prompt else 0,
        budget=state.prompt.decision if state.prompt else None,
        answer_source=state.answer_source if state.answer_source != "none" else "model",
        support=list(state.support),
        memory=list(state.memory),
    )
    if plan is not None and skip is None:
        trace.query, trace.query_source = plan.query, plan.source
        trace.alternate_queries = [q for q in plan.queries if q != plan.query]
        if len(state.query_weights) == len(plan.queries):
            trace.query_weights = dict(zip(plan.queries, state.query_weights, strict=True))
    return trace


async def run_stages(
    observer: StageObserver, stages: Sequence[Stage], state: TurnState, sink: AnswerSink | None = None
) -> tuple[TurnState, list[StageRecord]]:
    """Run ``stages`` in order over ``state`` under ``observer``: the turn's loop, and evaluation's
    (:mod:`anaphora.evaluation.retrieval_half`). ``sink``, the turn's stream, is handed to the stage that releases
    the answer and to no other: no other stage can put text on the stream."""
    records: list[StageRecord] = []
    for stage in stages:
        state = await observer.run(stage, state, records, sink if stage.releases else None)
    return state, records


def sanitized(messages: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(Message(role=m.role, content=sanitize(m.content)) for m in messages)


def said_reader(conversations: ConversationStore) -> Callable[[TurnRequest], Awaitable[tuple[Message, ...]]]:
    """What a turn about the conversation reads back: up to :data:`SAID_TURNS` earlier turns, beyond the prompt's
    window. Read by that turn alone, not by the engine for every turn: on a 40-turn conversation reading and
    sanitising them takes about 14 ms, the window's 8 turns about 3 ms (SQLite, 2 cores)."""

    async def read_back(request: TurnRequest) -> tuple[Message, ...]:
        if request.conversation_id is None:
            return ()
        conversation, prelude = request.conversation_id, request.prelude
        before = await history_before(conversations, request.user_id, conversation, prelude, last=SAID_TURNS)
        return sanitized(turns_to_messages(before.recent))

    return read_back


class Engine:
    """Runs turns through ``stages`` over the conversation store. Every dependency is passed in;
    :func:`anaphora.app.build_stages` composes the stages and :func:`anaphora.app.build_components` the rest. The
    engine knows the order of the stages and what each declares it reads and writes, not what they do."""

    def __init__(
        self,
        stages: Sequence[Stage],
        *,
        conversations: ConversationStore,
        window: WindowPolicy | None = None,
        summaries: SummaryStore | None = None,
        summarizer: RollingSummarizer | None = None,
        memory_writer: RememberTurn | None = None,
        metrics: Metrics | None = None,
        tracer: Any | None = None,
    ) -> None:
        """``window``: which stored turns a turn loads and how (the budget applies the same policy);
        ``summarizer``: updates the rolling summary after a turn, in the background; ``memory_writer``: the stage
        that remembers each stored turn, run after the answer in the background (None: no long-term memory);
        ``tracer``: an OpenTelemetry tracer for spans per turn and stage (None: no spans). The engine closes
        nothing it was given: whoever built the parts does (:class:`anaphora.app.Components`)."""
        check_order(stages)
        self.stages: list[Stage] = list(stages)
        self.conversations = conversations
        self.window = window or WindowPolicy()
        self.summaries = summaries
        self.summarizer = summarizer
        self.metrics = metrics or Metrics()
        self.observer = StageObserver(self.metrics, tracer)
        self.memory_writer = memory_writer
        if memory_writer is not None:
            check_order([memory_writer], self._written() | STORED)
        self._background: set[asyncio.Task] = set()
        self._remembering: dict[str, asyncio.Task] = {}  # each user's latest memory write, while it runs

    def add_stage(self, stage: Stage, *, after: str) -> None:
        """Insert ``stage`` after the stage named ``after`` (e.g. ``"answer"``); refused (the list unchanged) when
        a stage would read a field no stage before it writes. A stage after the answer stage that writes
        ``answer`` makes the engine hold the stream until it has run (see :meth:`streams_live`)."""
        names = [s.name for s in self.stages]
        if after not in names:
            raise ValueError(f"no stage named {after!r}; the stages are {', '.join(names)}")
        stages = [*self.stages]
        stages.insert(names.index(after) + 1, stage)
        check_order(stages)
        if self.memory_writer is not None:
            check_order([self.memory_writer], self._written(stages) | STORED)
        self.stages[:] = stages

    def _written(self, stages: Sequence[Stage] | None = None) -> set[str]:
        """Every field the turn's start or a stage writes."""
        return set(INITIAL).union(*(s.writes for s in (self.stages if stages is None else stages)))

    def streams_live(self) -> bool:
        """Whether the answer streams as it is generated: only when no stage after the one that releases it
        (the answer stage) may change it. Otherwise the stream is held, and the final answer sent in one piece."""
        releasing = [i for i, s in enumerate(self.stages) if s.releases]
        if not releasing:
            return False
        return not any("answer" in s.writes for s in self.stages[releasing[0] + 1 :])

    def replace_stage(self, stage: Stage) -> None:
        """Put ``stage`` in place of the stage of the same name (e.g. another ``query`` stage in a test); refused
        (the list unchanged) like :meth:`add_stage`."""
        names = [s.name for s in self.stages]
        if stage.name not in names:
            raise ValueError(f"no stage named {stage.name!r}; the stages are {', '.join(names)}")
        stages = [*self.stages]
        stages[names.index(stage.name)] = stage
        check_order(stages)
        if self.memory_writer is not None:
            check_order([self.memory_writer], self._written(stages) | STORED)
        self.stages[:] = stages

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
        """Finish background work (the parts are closed by their owner, :meth:`anaphora.app.Components.aclose`)."""
        await self.drain()

    async def _run_stages(
        self, stages: Sequence[Stage], state: TurnState, sink: AnswerSink | None = None
    ) -> tuple[TurnState, list[StageRecord]]:
        return await run_stages(self.observer, stages, state, sink)

    async def _start(self, request: TurnRequest, turns_before: int) -> TurnState:
        """The turn's starting state: the sanitised question, recent history, its window and the summary."""
        question = sanitize(request.question).strip()
        if not question:
            raise InputError("the question is empty", hint="type a question")
        summary, window = "", None
        if request.history is not None:
            history = [m for m in request.history if m.role in ("user", "assistant")]
        elif request.conversation_id is None:
            history = []
        else:
            before = await history_before(
                self.conversations,
                request.user_id,
                request.conversation_id,
                request.prelude,
                last=self.window.max_turns,
            )
            turns_before, stored = before.turns_before, before.recent
            request = replace(request, conversation_id=before.conversation_id, prelude=before.prelude)  # a branch?
            history = turns_to_messages(stored)
            covers = 0
            opens = request.prelude is not None and request.prelude.start is not None  # no summary yet
            if self.window.summary and self.summaries is not None and not opens:
                current = await self.summaries.summary(request.user_id, request.conversation_id)
                summary, covers = (current.text, current.covers_turns) if current else ("", 0)
            window = ConversationWindow.from_stored(stored, turns_before, self.window, covers)
        if window is None:
            window = ConversationWindow(turns_before, len(history) // 2)
        return TurnState(
            question=question,
            request=request,
            history=sanitized(history),
            turns_before=turns_before,
            window=window,
            summary=sanitize(summary),
        )

    async def _run(self, request: TurnRequest, deltas: Deltas | None) -> TurnResult:
        sink = AnswerSink(deltas, live=self.streams_live())  # the one owner of the turn's stream
        # a turn stored nowhere, or a temporary one, leaves no vector of its words in the persistent cache
        temporary = request.conversation_id is None or not request.memory
        with self.observer.turn() as finish, unpersisted_embeddings(temporary):
            try:
                result = await self._turn(request, sink)
            finally:
                sink.end()
            finish(result.trace)
            return result

    async def _turn(self, request: TurnRequest, sink: AnswerSink) -> TurnResult:
        # a stored conversation's turns are counted when its history is read (an unknown one is refused there)
        turns_before = sum(1 for m in request.history or () if m.role == "user")
        if request.memory:
            await self._remembered(request.user_id)
        state, records = await self._run_stages(self.stages, await self._start(request, turns_before), sink)
        request = state.request  # where the turn is stored, as its history was read
        sink.release(state.answer)  # what the answer phase decided, now final
        trace = trace_of(state, records)
        citations = list(state.citations)

        turn_index = turns_before
        if request.conversation_id is not None:
            started = time.perf_counter()  # timed outside the trace, which is stored as it is now
            turn = NewTurn(
                question=request.question,
                answer=state.answer,
                citations=citations,
                trace=trace,  # audit only: what the next turn reads are the two fields below
                shown_passages=list(state.shown_passages),
                window_start=state.window_start,
            )
            stored = await write_turn(
                self.conversations, request.user_id, request.conversation_id, request.prelude, turn
            )
            self.observer.seconds("remember", time.perf_counter() - started)
            turn_index = stored.index
            self._schedule_summary(request, self._summary_reach(state))
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

    def _summary_reach(self, state: TurnState) -> int:
        decision = state.prompt.decision if state.prompt else None
        return (state.window or ConversationWindow(state.turns_before)).summary_reach(decision, self.window)

    def _schedule_memory(self, state: TurnState) -> None:
        """Remember the stored turn after the answer, observed like every stage (fail-open, counted)."""
        if self.memory_writer is None:
            return
        task = asyncio.get_running_loop().create_task(self.observer.run(self.memory_writer, state, []))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        user = state.request.user_id
        self._remembering[user] = task
        task.add_done_callback(lambda done: self._remembering.get(user) is done and self._remembering.pop(user))

    async def _remembered(self, user: str) -> None:
        """Wait (at most :data:`READ_YOUR_WRITES_S`) for the memory write of ``user``'s last turn: a message sent
        right after an answer ("fyi our nodes are ARM64", then at once "how do I install it?") is answered with
        what that turn taught. The embedded write takes milliseconds and a user who types never waits; a write
        that asks a chat model for facts may take longer, and the turn goes on without what it has not written."""
        pending = self._remembering.get(user)
        if pending is not None:
            await asyncio.wait({pending}, timeout=READ_YOUR_WRITES_S)

    def _schedule_summary(self, request: TurnRequest, covers: int) -> None:
        """Summarise turns that will not be shown verbatim any more, after the answer, without blocking it."""
        summarizer = self.summarizer
        if not (self.window.summary and summarizer and covers > 0):
            return
        work = summarizer.update(request.user_id, request.conversation_id or "", covers)
        task = asyncio.get_running_loop().create_task(
            self.observer.background("summary", "summarizer", work, summarizer.timeout_s)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
