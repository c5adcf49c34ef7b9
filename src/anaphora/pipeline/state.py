"""The turn's state: one frozen value that flows through the stages, each returning an updated copy.

The engine decides from this state, never from the trace; the trace is written from it once the turn is over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from anaphora.memory.dates import date_label
from anaphora.types import Citation, Message, ModelCall, Passage, RecalledMemory, UnitVerdict

if TYPE_CHECKING:
    from anaphora.models.base import Usage
    from anaphora.pipeline.budget import PromptPlan
    from anaphora.pipeline.query import QueryPlan
    from anaphora.pipeline.route import Route

LOCAL_USER = "local"
Deltas = asyncio.Queue[str | None]


@dataclass
class TurnRequest:
    question: str
    user_id: str = LOCAL_USER
    conversation_id: str | None = None
    history: Sequence[Message] | None = None  # stateless mode: the caller sends the history
    temperature: float | None = None  # per-request answer options; None: the settings decide
    max_tokens: int | None = None
    memory: bool = True  # False: a temporary chat; nothing is remembered from this turn or recalled into it


@dataclass(frozen=True, slots=True)
class Skip:
    """Retrieval is not needed: ``reason`` is the counted label, ``why`` the sentence the trace shows."""

    reason: str
    why: str


@dataclass(frozen=True, slots=True)
class TurnState:
    """What is known about the turn so far. ``question`` and ``history`` are sanitised."""

    question: str
    request: TurnRequest
    history: tuple[Message, ...] = ()
    turns_before: int = 0  # turns of the conversation before this one (``history`` may hold only the recent ones)
    history_excerpts: tuple[tuple[Passage, ...], ...] = ()  # per turn of ``history``: the passages it showed
    previous_window_start: int | None = None  # index of the oldest turn the previous turn's prompt showed verbatim
    summary_covers: int = 0  # how many of the oldest turns the summary covers
    summary: str = ""
    route: Route | None = None
    plan: QueryPlan | None = None
    skip: Skip | None = None
    candidates: tuple[Passage, ...] = ()  # every first-stage candidate that survived selection, best first
    selected: tuple[Passage, ...] = ()  # what the prompt may show (the top k)
    abstain: bool = False  # retrieval ran and found nothing relevant enough: say so rather than guess
    prompt: PromptPlan | None = None
    answer: str = ""
    answer_source: str = "model"  # "model", "extractive" (quoted), "conversation" (from the history), "abstain"
    released: str = ""  # what the streaming caller has been sent of the answer so far
    support: tuple[UnitVerdict, ...] = ()  # the answer check's verdicts, unit by unit
    citations: tuple[Citation, ...] = ()
    calls: tuple[ModelCall, ...] = ()  # chat-model calls made: purpose ("rewrite", "answer", ...) and usage
    deltas: Deltas | None = field(default=None, compare=False, repr=False)  # the streaming caller's queue
    memory: tuple[RecalledMemory, ...] = ()  # long-term memory recalled (the injected ones are shown)
    profile: str = ""  # the user's long-term profile summary (sanitised)
    turn_index: int | None = None  # set once the turn is stored (what memory writing cites)
    turn_time: float | None = None

    @property
    def retrieves(self) -> bool:
        """Whether this turn uses the documents (nothing decided to skip retrieval)."""
        return self.skip is None

    @property
    def memory_passages(self) -> tuple[Passage, ...]:
        """The injected memory items as the prompt, the answer check and the citations see them: sources beside
        the document passages, named ``memory:<id>`` and labelled with the day they were said."""
        return tuple(
            Passage(id=m.passage_id, text=m.text, source="memory", heading=date_label(m.time), score=m.score)
            for m in self.memory
            if m.injected
        )

    @property
    def sources(self) -> tuple[Passage, ...]:
        """What this turn may answer from: the selected passages (when it retrieved) and the injected memories."""
        return (self.selected if self.retrieves else ()) + self.memory_passages

    def update(self, **changes) -> TurnState:
        return replace(self, **changes)

    def called(
        self, purpose: str, times: int = 1, usage: Usage | None = None, first_token_ms: float | None = None
    ) -> tuple[ModelCall, ...]:
        """``calls`` with ``times`` more calls for ``purpose`` (the last one's ``usage``, when known)."""
        made = [ModelCall(purpose=purpose) for _ in range(times)]
        if made and usage is not None:
            made[-1] = ModelCall(
                purpose=purpose,
                prompt_tokens=usage.prompt_tokens,
                cached_tokens=usage.cached_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                completion_tokens=usage.completion_tokens,
                first_token_ms=first_token_ms,
            )
        return self.calls + tuple(made)
