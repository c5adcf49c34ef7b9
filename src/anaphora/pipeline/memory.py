"""The two memory stages: recall before the answer, writing after it (in the background).

``RecallMemory`` ranks the user's long-term memory for the turn (:mod:`anaphora.memory.recall`) and injects the
few items that pass the threshold; the trace lists the best ones with why each was recalled and whether it was
shown. ``RememberTurn`` writes what the stored turn teaches (:mod:`anaphora.memory.writer`). Both are optional:
on an error or past their time budget the observer counts the failure and the turn goes on without memory.
"""

from __future__ import annotations

import time

from anaphora.memory.protocols import MemoryReader
from anaphora.memory.recall import MemoryRecall, Recalled
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from anaphora.sanitize import sanitize
from anaphora.types import RecalledMemory

TRACED = 10  # recalled items the trace lists (shown or not)


def record_of(recalled: Recalled, injected: bool) -> RecalledMemory:
    item = recalled.item
    return RecalledMemory(
        id=item.id,
        kind=item.kind,
        text=sanitize(item.text),
        conversation_id=item.conversation_id,
        turns=list(item.turns),
        time=item.time,
        current=item.current,
        score=round(recalled.score, 4),
        similarity=None if recalled.similarity is None else round(recalled.similarity, 4),
        why=recalled.why,
        injected=injected,
    )


def in_history(recalled: Recalled, state: TurnState) -> bool:
    """Whether the item only repeats turns this turn's prompt already has verbatim (the conversation's recent
    turns): recalling them spends the memory budget on nothing new. Older turns of the same conversation stay
    recallable (long-range callbacks), and so does every other conversation."""
    item = recalled.item
    if item.conversation_id != state.request.conversation_id or not item.turns:
        return False
    first_verbatim = state.turns_before - sum(1 for m in state.history if m.role == "user")
    return min(item.turns) >= first_verbatim


class RecallMemory(Stage):
    """Recalls the user's memories for this turn's query; injects at most ``k`` whose cosine similarity to it is
    at least ``min_score``. A turn whose documents gave nothing but whose memory did is answered from memory. A turn
    that skips retrieval (chit-chat, answered by the conversation) recalls nothing, but still gets the profile.
    Items that only repeat the turns already verbatim in the prompt are left out."""

    name = "memory"
    reads = ("request", "question", "history", "turns_before", "skip", "plan")
    writes = ("profile", "memory")
    counter = "memory_recall"

    def __init__(
        self, recall: MemoryRecall, profiles: MemoryReader, *, k: int, min_score: float, timeout_s: float
    ) -> None:
        self.recall = recall
        self.profiles = profiles
        self.k = k
        self.min_score = min_score
        self.timeout_s = timeout_s

    def applies(self, state: TurnState) -> bool:
        return state.request.memory  # a temporary chat recalls nothing

    async def run(self, state: TurnState) -> StageResult:
        user = state.request.user_id
        profile = await self.profiles.profile(user)  # on every turn: it is part of the stable prompt prefix
        state = state.update(profile=sanitize(profile.text) if profile else "")
        if not state.retrieves:  # chit-chat, or the conversation holds the answer: nothing to recall
            return StageResult(state, "skipped", "retrieval skipped: profile only")
        query = state.plan.query if state.plan is not None else state.question
        ranked = [r for r in await self.recall.rank(user, query, now=time.time()) if not in_history(r, state)]
        shown = 0
        records = []
        for recalled in ranked[:TRACED]:
            inject = shown < self.k and recalled.similarity is not None and recalled.similarity >= self.min_score
            shown += inject
            records.append(record_of(recalled, inject))
        after = state.update(memory=tuple(records))  # injected ones are sources: the turn may answer from them
        return StageResult(after, "ok", f"{shown} of {len(ranked)} recalled items shown")

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return state, "answered without memory"


class RememberTurn(Stage):
    """Writes the stored turn into the user's memory; the engine runs it after the answer, in the background."""

    name = "memory_write"
    reads = ("request", "history", "answer", "answer_source", "turn_index", "turn_time")
    counter = "memory_writer"

    def __init__(self, recorder: TurnRecorder, *, timeout_s: float) -> None:
        self.recorder = recorder
        self.timeout_s = timeout_s

    def applies(self, state: TurnState) -> bool:  # a temporary chat leaves nothing
        return state.request.memory and state.turn_index is not None and state.request.conversation_id is not None

    async def run(self, state: TurnState) -> StageResult:
        assert state.turn_index is not None and state.request.conversation_id is not None
        previous = next((m.content for m in reversed(state.history) if m.role == "user"), "")
        turn = TurnToRemember(
            user_id=state.request.user_id,
            conversation_id=state.request.conversation_id,
            index=state.turn_index,
            question=state.request.question,
            answer=state.answer if state.answer_source != "abstain" else "",
            time=state.turn_time if state.turn_time is not None else 0.0,
            context=previous,
        )
        written = await self.recorder.record(turn)
        return StageResult(state, "ok", written.detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str]:
        return state, "nothing remembered for this turn"
