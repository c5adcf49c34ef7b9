"""The turn's state: one frozen value that flows through the stages. A stage returns only what it changes
(:data:`Changes`), and the observer applies the names the stage declares it writes.

The engine decides from this state, never from the trace; the trace is written from it once the turn is over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from anaphora.answering.extractive import ExtractiveAnswer, ExtractRequest, same_page
from anaphora.reading.dates import date_label
from anaphora.store.chains import Prelude
from anaphora.types import Citation, Message, ModelCall, Passage, RecalledMemory, UnitVerdict

if TYPE_CHECKING:
    from anaphora.models.base import Usage
    from anaphora.pipeline.budget import PromptPlan
    from anaphora.pipeline.query import QueryPlan
    from anaphora.pipeline.window import ConversationWindow
    from anaphora.reading.message import Reading
    from anaphora.reading.route import Route

LOCAL_USER = "local"

Changes = Mapping[str, Any]
"""What a stage changed, by :class:`TurnState` field name: the new values of fields it declares in ``writes``
(``{}``: nothing changed). The observer applies them; a name the stage does not declare is refused."""


@dataclass
class TurnRequest:
    question: str
    user_id: str = LOCAL_USER
    conversation_id: str | None = None
    history: Sequence[Message] | None = None  # stateless mode: the caller sends the history
    temperature: float | None = None  # per-request answer options; None: the settings decide
    max_tokens: int | None = None
    memory: bool = True  # False: a temporary chat; nothing is remembered from this turn or recalled into it
    prelude: Prelude | None = None  # stored with the turn, in its transaction: the chain it opens, turns added


def said_by_user(memory: RecalledMemory) -> str:
    """A memory's provenance as a person reads it: who said it, when, and where (1-based turns)."""
    turns = ", ".join(str(t + 1) for t in memory.turns)
    what = "the user said" if memory.kind == "episode" else "stated by the user"
    return f"{what}, {date_label(memory.time)}" + (f", turn {turns}" if turns else "")


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
    window: ConversationWindow | None = None  # the earlier turns as the prompt may show them (None: no history)
    summary: str = ""
    reading: Reading | None = None  # the message read by every rule, once (the router stage's)
    route: Route | None = None
    plan: QueryPlan | None = None
    skip: Skip | None = None
    candidates: tuple[Passage, ...] = ()  # every first-stage candidate that survived selection, best first
    query_weights: tuple[float, ...] = ()  # each of the plan's queries' weight in the fusion (plan.queries' order)
    selected: tuple[Passage, ...] = ()  # what the prompt may show (the top k)
    prompt: PromptPlan | None = None
    answer: str = ""
    answer_source: str = "none"  # "model", "extractive" (quoted), "conversation" (from the history),
    # "acknowledged" (a statement about the user), "abstain"; "none" before an answer is decided
    support: tuple[UnitVerdict, ...] = ()  # the answer check's verdicts, unit by unit
    citations: tuple[Citation, ...] = ()
    calls: tuple[ModelCall, ...] = ()  # chat-model calls made: purpose ("rewrite", "answer", ...) and usage
    memory: tuple[RecalledMemory, ...] = ()  # long-term memory recalled (the injected ones are shown)
    profile: str = ""  # the user's long-term profile summary (sanitised)
    turn_index: int | None = None  # set once the turn is stored (what memory writing cites)
    turn_time: float | None = None
    memory_epoch: int | None = None  # the user's erase epoch when the turn began (what the memory write checks)
    personal: str = ""  # the user's stated facts the plan's queries were personalised with (appended to them)
    said_back: str = ""  # what of them the user's previous message stated, as a quoted answer says it back
    uncovered: tuple[str, ...] = ()  # names the question asks about that no document mentions (the coverage check)

    @property
    def retrieves(self) -> bool:
        """Whether this turn uses the documents (nothing decided to skip retrieval)."""
        return self.skip is None

    @property
    def nothing_found(self) -> bool:
        """Retrieval ran and nothing relevant enough was found, in the documents or the user's memory: the answer
        says so rather than guess."""
        return self.retrieves and not self.sources

    @property
    def abstained(self) -> bool:
        """The turn's one abstention: the answer stage abstained (before it: retrieval found nothing)."""
        return self.answer_source == "abstain" or (self.answer_source == "none" and self.nothing_found)

    @property
    def memory_passages(self) -> tuple[Passage, ...]:
        """The injected memory items as the prompt, the answer check and the citations see them: sources beside
        the document passages, named ``memory:<id>`` and labelled with who said it and when (the user, always:
        memory holds what the user said, never an earlier answer)."""
        return tuple(
            Passage(id=m.passage_id, text=m.text, source="memory", heading=said_by_user(m), score=m.score)
            for m in self.memory
            if m.injected
        )

    @property
    def leading_facts(self) -> tuple[Passage, ...]:
        """The injected facts a question about the user asks for (the answer leads with them)."""
        leading = {m.passage_id for m in self.memory if m.injected and m.leads}
        return tuple(p for p in self.memory_passages if p.id in leading)

    @property
    def sources(self) -> tuple[Passage, ...]:
        """What this turn may answer from: the selected passages (when it retrieved) and the injected memories."""
        return (self.selected if self.retrieves else ()) + self.memory_passages

    @property
    def shown_passages(self) -> tuple[Passage, ...]:
        """The document passages this turn's answer was given from, as later turns show them again (history
        excerpts): what the prompt showed of the selection; none when the turn skipped retrieval or abstained.
        Stored with the turn (:attr:`~anaphora.store.protocols.StoredTurn.shown_passages`)."""
        if self.prompt is None or not self.retrieves or self.abstained:
            return ()
        return tuple(self.prompt.passages)

    @property
    def window_start(self) -> int | None:
        """Index of the oldest earlier turn this turn's prompt showed verbatim (None: no prompt was planned); the
        next turn's window goes on from it. Stored with the turn."""
        if self.prompt is None:
            return None
        return max(0, self.turns_before - self.prompt.decision.turns_kept)

    def extract_request(self) -> ExtractRequest:
        """What the extractive answerer quotes from on this turn: the selection and its pages' other passages (when
        it retrieved), for the retrieval query. What the user said in this conversation is in its history (quoting
        it back answers nothing); what the user said elsewhere answers a question about the user, or one no
        document answers; beside the documents' answer to a question about them it is context, not a point."""
        documents = self.selected if self.retrieves else ()
        documents = (*documents, *same_page(self.candidates, documents))
        query = self.plan.query if self.plan and self.retrieves else self.question
        leading = self.leading_facts
        earlier = {m.passage_id for m in self.memory if m.conversation_id != self.request.conversation_id}
        quotable = not documents or (self.reading is not None and self.reading.about_user)
        others = tuple(p for p in self.memory_passages if p not in leading and p.id in earlier) if quotable else ()
        return ExtractRequest(
            question=self.question,
            query=query,
            documents=tuple(documents),
            leading=leading,
            others=others,
            said_back=self.said_back,
            user=self.request.user_id,
        )

    def quote(self, extract: ExtractiveAnswer) -> Changes:
        """The changes of answering this turn with ``extract``: its text, and beside the selection the passages of
        the selected pages it quoted from (what the citations then find)."""
        shown = {p.id for p in self.sources}
        selected = (*self.selected, *(p for p in extract.quoted if p.id not in shown))
        return {"answer": extract.text, "answer_source": "extractive", "selected": selected}

    def update(self, **changes) -> TurnState:
        """A copy with ``changes``: what ``dataclasses.replace`` does, at a third of its cost (the observer applies
        each stage's changes with it; a stage of several strategies may build its intermediate states with it)."""
        new = _new(TurnState)
        for name, value in zip(_NAMES, _values(self), strict=True):
            _set(new, name, value)
        for name, value in changes.items():
            if name not in FIELDS:
                raise TypeError(f"TurnState has no field {name!r}")
            _set(new, name, value)
        return new

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


# written when the turn starts (the engine's ``_start``; memory, profile, calls and the answer start empty: a stage
# before the answer stage may decide the answer, which the answer stage then leaves as it is)
INITIAL = frozenset(
    {
        "answer",
        "answer_source",
        "question",
        "request",
        "history",
        "turns_before",
        "window",
        "summary",
        "memory",
        "profile",
        "personal",
        "said_back",
        "uncovered",
        "calls",
    }
)
STORED = frozenset({"turn_index", "turn_time"})  # written once the turn is stored (what background stages read)

_NAMES = tuple(f.name for f in fields(TurnState))
_values = attrgetter(*_NAMES)
FIELDS = frozenset(_NAMES)  # what a stage may declare it reads or writes
_new, _set = object.__new__, object.__setattr__  # a frozen dataclass is built this way by its own __init__
