"""The turn pipeline's async core.

sanitize -> query (rewrite for retrieval only) -> retrieve -> select -> prompt -> generate -> cite -> remember

The generator always answers the user's original words; the retrieval query lives only in the trace.
A turn runs in its own task: a streaming caller that stops reading does not stop the turn from being stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from anaphora.errors import InputError
from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.answer_guard import ANSWER_STOP, RepetitionGuard, extractive_answer
from anaphora.pipeline.citations import extract_citations
from anaphora.pipeline.prompt import build_messages
from anaphora.pipeline.query import QueryStage
from anaphora.pipeline.trace import timed
from anaphora.retrieval.hybrid import HybridRetriever
from anaphora.sanitize import sanitize
from anaphora.settings import Settings
from anaphora.store.protocols import ConversationStore, StoredTurn
from anaphora.types import Message, Passage, TurnResult, TurnTrace

LOCAL_USER = "local"
NO_ANSWER = "I could not find this in the documents."


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
    """Runs turns. Every dependency is passed in; :func:`anaphora.app.build_engine` wires the defaults."""

    def __init__(
        self,
        settings: Settings,
        *,
        chat_model: ChatModel,
        retriever: HybridRetriever,
        conversations: ConversationStore,
        query_stage: QueryStage,
    ) -> None:
        self.settings = settings
        self.chat_model = chat_model
        self.retriever = retriever
        self.conversations = conversations
        self.query_stage = query_stage

    async def ask(self, request: TurnRequest) -> TurnResult:
        """Run one turn to completion (no streaming)."""
        return await self._run(request, None)

    def stream(self, request: TurnRequest) -> TurnStream:
        """Start one turn in its own task and stream its answer; the turn completes even if nobody reads."""
        deltas: asyncio.Queue[str | None] = asyncio.Queue()
        task = asyncio.get_running_loop().create_task(self._run(request, deltas))
        return TurnStream(task, deltas)

    async def _history(self, request: TurnRequest) -> list[Message]:
        if request.history is not None:
            return [m for m in request.history if m.role in ("user", "assistant")]
        if request.conversation_id is None:
            return []
        turns = await self.conversations.turns(request.user_id, request.conversation_id)
        return turns_to_messages(turns)

    async def retrieve(
        self, question: str, history: Sequence[Message], query_stage: QueryStage | None = None
    ) -> tuple[list[Passage], TurnTrace]:
        """The retrieval half of a turn, without generation: returns all ranked candidates and the trace, whose
        ``retrieved`` holds the passages selected for the prompt.

        ``question`` and ``history`` must already be sanitised. Evaluation calls this directly, optionally with
        another ``query_stage`` (a baseline), so that what is measured is exactly what a turn does.
        """
        trace = TurnTrace(question=question)
        with timed(trace, "query") as stage:
            plan = await (query_stage or self.query_stage).run(question, history)
            stage.set(plan.status, plan.detail)
        trace.query, trace.query_source = plan.query, plan.source
        trace.model_calls += plan.model_calls

        with timed(trace, "retrieve") as stage:
            candidates = await self.retriever.run(plan.query)
            stage.set("ok", f"{len(candidates)} candidates")
        trace.retrieved = candidates[: self.settings.top_k]
        return candidates, trace

    async def _run(self, request: TurnRequest, deltas: asyncio.Queue[str | None] | None) -> TurnResult:
        question = sanitize(request.question).strip()
        if not question:
            raise InputError("the question is empty", hint="type a question")
        history = [Message(role=m.role, content=sanitize(m.content)) for m in await self._history(request)]
        _, trace = await self.retrieve(question, history)
        passages = trace.retrieved

        window = history[-2 * self.settings.history_turns :] if self.settings.history_turns else []
        messages = build_messages(self.settings.system_prompt, window, passages, question)
        options = ChatOptions(
            temperature=self.settings.answer_temperature,
            max_tokens=self.settings.answer_max_tokens,
            stop=ANSWER_STOP,
        )
        with timed(trace, "generate") as stage:
            answer, guard = await self._generate(messages, options, deltas)
            if not answer:
                answer = extractive_answer(question, passages) or NO_ANSWER
                stage.set("ok", "model gave no usable answer: quoted the best passages instead")
                self._emit(deltas, answer)
            elif guard.tripped:
                stage.set("ok", "stopped the model repeating itself or echoing the prompt")
            self._emit(deltas, None)
        trace.model_calls += 1
        trace.prompt_tokens = sum(self.chat_model.count_tokens(m.content) for m in messages)

        citations = extract_citations(answer, passages)
        conversation_id = request.conversation_id or ""
        turn_index = len(history) // 2
        if request.conversation_id is not None:
            with timed(trace, "remember"):
                stored = await self.conversations.append_turn(
                    request.user_id, request.conversation_id, request.question, answer, citations, trace
                )
            turn_index = stored.index
        return TurnResult(
            conversation_id=conversation_id,
            turn_index=turn_index,
            question=request.question,
            answer=answer,
            citations=citations,
            trace=trace,
        )

    @staticmethod
    def _emit(deltas: asyncio.Queue[str | None] | None, text: str | None) -> None:
        if deltas is not None:
            deltas.put_nowait(text)

    async def _generate(
        self, messages: list[Message], options: ChatOptions, deltas: asyncio.Queue[str | None] | None
    ) -> tuple[str, RepetitionGuard]:
        """Generate under the repetition guard. Streaming holds back the sentence being written, so what was
        streamed always equals the final answer."""
        guard = RepetitionGuard()
        if deltas is None:
            text = (await self.chat_model.chat(messages, options)).text
            cut = guard.check(text)
            return (text if cut is None else cut).strip(), guard
        text, sent = "", 0
        try:
            async for piece in self.chat_model.stream(messages, options):
                text = (text + piece) if sent else (text + piece).lstrip()
                cut = guard.check(text)
                if cut is not None:
                    text = cut
                    break
                boundary = max(text.rfind(". "), text.rfind("\n"), text.rfind("? "), text.rfind("! "))
                if boundary + 1 > sent and text[boundary + 1 :].strip():  # never end a delta on trailing space
                    self._emit(deltas, text[sent : boundary + 1])
                    sent = boundary + 1
        except BaseException:
            self._emit(deltas, None)
            raise
        answer = text.rstrip()
        if len(answer) > sent:
            self._emit(deltas, answer[sent:])
        return answer, guard
