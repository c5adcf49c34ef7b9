"""The memory stages: acknowledging a statement, recall before the answer, writing after it (in the background).

``AcknowledgeStatement`` answers a turn that only states something about the user ("fyi: we run Traefik v3 on a
VM") with a short acknowledgement instead of document quotes. ``RecallMemory`` ranks the user's long-term memory
for the turn (:mod:`anaphora.memory.recall`) and injects the few items that pass the threshold; for a question
about the user ("which version did I say I run?") the relevant current facts first, even below it, and the answer
leads with them. The trace lists the best items with why each was recalled and whether it was shown.
``RememberTurn`` writes what the stored turn teaches (:mod:`anaphora.memory.writer`), under the user's erase epoch
read when the turn began. All are optional: on an error or past their time budget the observer counts the failure
and the turn goes on without memory.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace

from anaphora.memory.protocols import MemoryReader
from anaphora.memory.recall import MemoryRecall, Recalled
from anaphora.memory.selection import Asked, ShowPolicy, select
from anaphora.memory.types import MemoryItem
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import Changes, Skip, TurnRequest, TurnState
from anaphora.reading.extract import NO_LONGER
from anaphora.reading.message import read
from anaphora.reading.personal import (
    acknowledgement,
    as_you_said,
    fact_answers,
    second_person,
    states_again,
    without_label,
)
from anaphora.retrieval.terms import TermStatistics, generic
from anaphora.sanitize import sanitize
from anaphora.text import words
from anaphora.types import RecalledMemory

TRACED = 10  # recalled items the trace lists (shown or not)
Statistics = Callable[[], TermStatistics | None] | None  # the documents' term statistics, when there are any
ACKNOWLEDGED = "acknowledged"  # the answer source of a statement's acknowledgement


class ReadEraseEpoch(Stage):
    """Reads the user's erase epoch as the turn begins; the turn's background memory write checks it inside its
    transaction, so an erase or forget-all that comes before the write wins, on any replica. When it cannot be
    read, the write is dropped rather than risk bringing erased memories back."""

    name = "memory_epoch"
    reads = ("request",)
    writes = ("memory_epoch",)

    def __init__(self, writer: RememberTurn, *, timeout_s: float = 2.0) -> None:
        self.writer = writer
        self.timeout_s = timeout_s

    def applies(self, state: TurnState) -> bool:
        return self.writer.applies_to(state.request)

    async def run(self, state: TurnState) -> StageResult:
        epoch = await self.writer.epoch(state.request.user_id)
        return StageResult({"memory_epoch": epoch}, "ok", f"epoch {epoch}")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {"memory_epoch": UNREADABLE}, "this turn will not be remembered"


UNREADABLE = -1  # an epoch no store has: the write is dropped


class AcknowledgeStatement(Stage):
    """A turn that states something about the user and asks nothing is acknowledged in one short reply (what was
    understood; whether it is remembered), with no retrieval and no model call. ``remembers``: long-term memory is
    on (a temporary chat says it is not kept)."""

    name = "acknowledge"
    reads = ("reading", "request", "skip", "answer")
    writes = ("skip", "answer", "answer_source")

    def __init__(self, *, remembers: bool) -> None:
        self.remembers = remembers

    def applies(self, state: TurnState) -> bool:
        return state.retrieves and not state.answer

    async def run(self, state: TurnState) -> StageResult:
        reading = state.reading
        facts = list(reading.facts)
        if not reading.states_setup:
            return StageResult({}, "skipped", "not a statement about the user")
        remembered = self.remembers and state.request.memory and state.request.conversation_id is not None
        reply = acknowledgement(facts, remembered=remembered)
        changes = {
            "skip": Skip("statement", "a statement about the user: acknowledged, nothing to look up"),
            "answer": reply,
            "answer_source": ACKNOWLEDGED,
        }
        return StageResult(changes, "ok", f"acknowledged, {len(facts)} facts understood")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "answered as a question"


PERSONAL_FACTS = 3  # stated facts a query is personalised with, newest first
_USER_PREFIX = re.compile(r"^the user(?:'s)?\s+", re.I)


def everyday_words(question: str, statistics: Statistics) -> list[str]:
    """The question's words the documents use everywhere (:func:`~anaphora.retrieval.terms.generic`): sharing one
    with a fact does not make the fact relevant."""
    return generic(words(question), statistics() if statistics else None)


def personal_words(fact: MemoryItem) -> str:
    """What a fact adds to a query: its statement without "the user" ("docker hosts are ARM64 (graviton boxes)")."""
    return _USER_PREFIX.sub("", fact.text)


def said_before(state: TurnState) -> bool:
    """The turn's conversation has stored turns: statements of it may exist (they do only after its first turn)."""
    return state.request.conversation_id is not None and state.turns_before > 0


class PersonalQuery(Stage):
    """The user's stated setup joins the retrieval query. A user who says "fyi all our docker hosts are ARM64" and
    then asks "how do I get container logs into Loki?" wants the answer for ARM64 hosts, though the question does
    not say so. What the user stated in this conversation, newest first, at most :data:`PERSONAL_FACTS` turns (the
    current facts of what a turn says, restated ones included, or the words of a statement no fact rule reads:
    "tenant `payments` has to keep logs 90 days"), and for a question about the user ("which version do I run?")
    the current facts of other conversations that answer it, are added to the plan's queries (what the retriever
    and the extractive answer rank by; ``personal`` says what was added). A fact superseded since is said as its
    current value; one that says a thing is no longer used adds nothing. Memory recall ranks by the query without
    them: recalling by them would only find the statements again."""

    name = "personal_query"
    reads = ("request", "question", "reading", "turns_before", "plan", "skip")
    writes = ("plan", "personal", "said_back")
    retrieval = True
    counter = "memory_recall"

    def __init__(self, memory: MemoryReader, *, timeout_s: float, statistics: Statistics = None) -> None:
        self.memory = memory
        self.timeout_s = timeout_s
        self.statistics = statistics

    def applies(self, state: TurnState) -> bool:
        if not (state.request.memory and state.retrieves and state.plan is not None):
            return False
        # statements of this conversation exist only after its first stored turn; others count for questions
        # about the user: a first turn, or a stateless one, that does not ask about the user reads no memory
        return said_before(state) or state.reading.about_user

    def _bearing(self, state: TurnState, episodes: list[MemoryItem], facts: list[MemoryItem]) -> tuple[list[str], str]:
        """What this turn's query is personalised with, newest first, and the line that says back what of it the
        user's previous message stated (:func:`~anaphora.reading.personal.as_you_said`)."""
        here = state.request.conversation_id
        by_turn: dict[int, list[MemoryItem]] = {}
        for f in facts:
            if f.conversation_id == here:
                for turn in f.turns:
                    by_turn.setdefault(turn, []).append(f)
        current = {f.attribute: f for f in reversed(facts) if f.current}  # the newest current fact per key
        said, back, used = [], "", set()
        previous = state.turns_before - 1
        for episode in (e for e in episodes if e.conversation_id == here and e.turns):
            # the turn's facts, read again from its words: a restated fact the store kept from an earlier
            # conversation counts as stated here too, and an outdated one is said as its current value
            said_then = read(episode.text)
            keys = [f.attribute for f in said_then.facts]
            keys += [f.attribute for f in by_turn.get(episode.turns[0], [])]
            kept = [current[k] for k in dict.fromkeys(keys) if k in current]
            fresh = [f for f in kept if f.id not in used and not f.value.startswith(NO_LONGER)]
            used.update(f.id for f in kept)
            just_said = episode.turns[0] == previous
            if fresh:
                said.append(" ".join(map(personal_words, fresh)))
                back = as_you_said(facts=[second_person(f.text) for f in fresh]) if just_said else back
            elif not keys and said_then.states_setup:  # a statement no fact rule reads: its words
                stated = without_label(episode.text)
                said.append(stated)
                back = as_you_said(words=stated) if just_said else back
        # facts of other conversations count only for a question about the user
        others = [f for f in facts if f.conversation_id != here and f.current and not f.value.startswith(NO_LONGER)]
        others = [f for f in others if not states_again(state.question, f.value)] if state.reading.about_user else []
        everyday = everyday_words(state.question, self.statistics) if others else []  # read only when it counts
        elsewhere = [personal_words(f) for f in others if fact_answers(state.question, f.text, f.value, everyday)]
        return (said + elsewhere)[:PERSONAL_FACTS], back

    async def run(self, state: TurnState) -> StageResult:
        assert state.plan is not None
        user = state.request.user_id
        here = state.request.conversation_id
        episodes = list((await self.memory.list(user, kind="episode", limit=50)).items) if said_before(state) else []
        # facts count only beside a statement made in this conversation, or for a question about the user
        wanted = any(e.conversation_id == here and e.turns for e in episodes) or state.reading.about_user
        facts = list((await self.memory.list(user, kind="fact", limit=50)).items) if wanted else []
        bearing, back = self._bearing(state, episodes, facts)
        if not bearing:
            return StageResult({}, "skipped", "nothing the user stated bears on this turn")
        said = " ".join(bearing)
        plan = state.plan
        personal = replace(plan, query=f"{plan.query} {said}", lead=f"{plan.lead} {said}" if plan.lead else None)
        changes = {"plan": personal, "personal": said, "said_back": back}
        return StageResult(changes, "ok", f"query personalised with {len(bearing)} of the user's statements")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "retrieved without the user's statements"


def record_of(recalled: Recalled, injected: bool, leads: bool = False, reason: str = "") -> RecalledMemory:
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
        why=recalled.why
        + ("; what the question about you asks for" if leads else "")
        + (f"; not shown: {reason}" if not injected and reason else ""),
        injected=injected,
        leads=leads,
    )


def in_history(recalled: Recalled, state: TurnState) -> bool:
    """Whether the episode only repeats turns this turn's prompt already has verbatim (the conversation's recent
    turns): recalling them spends the memory budget on nothing new. Older turns of the same conversation stay
    recallable (long-range callbacks), and so does every other conversation; so do facts, which the answer may
    lead with."""
    item = recalled.item
    if item.kind == "fact" or item.conversation_id != state.request.conversation_id or not item.turns:
        return False
    first_verbatim = state.turns_before - sum(1 for m in state.history if m.role == "user")
    return min(item.turns) >= first_verbatim


class RecallMemory(Stage):
    """Recalls the user's memories for this turn's query; injects at most ``k`` whose cosine similarity to it is
    at least ``min_score``. For a question about the user, the current facts that answer it come first: those that
    share a word with the question that is neither a name nor one the documents use everywhere (the docs site's
    product name), and, for a question that asks what the user said or has, those whose similarity is at least
    ``fact_min_score``. An episode the user asked (an earlier question, shown only for a question about what the user
    said), or one that says what this question or a message already in the prompt says and states nothing about
    the user (the same problem reported again), is no evidence and is not shown; neither is a fact superseded since,
    unless the question asks about the past ("which version did I run before?"). A turn whose documents gave
    nothing but whose memory did is answered from memory; but a question about something no document mentions
    (``uncovered``: "could loki keep its chunks in mongodb?") is answered only by a memory that names it, not by
    the user's other statements. A turn that skips retrieval (chit-chat, answered by the
    conversation) recalls nothing, but still gets the profile. Episodes that only repeat the turns already verbatim
    in the prompt are left out."""

    name = "memory"
    reads = ("request", "question", "reading", "history", "turns_before", "skip", "plan", "personal", "uncovered")
    writes = ("profile", "memory")
    counter = "memory_recall"

    def __init__(
        self,
        recall: MemoryRecall,
        profiles: MemoryReader,
        *,
        k: int,
        min_score: float,
        timeout_s: float,
        fact_min_score: float | None = None,
        statistics: Statistics = None,
    ) -> None:
        self.recall = recall
        self.statistics = statistics
        self.profiles = profiles
        self.policy = ShowPolicy(k, min_score, min_score if fact_min_score is None else fact_min_score)
        self.timeout_s = timeout_s

    def applies(self, state: TurnState) -> bool:
        return state.request.memory  # a temporary chat recalls nothing

    async def run(self, state: TurnState) -> StageResult:
        user = state.request.user_id
        profile = await self.profiles.profile(user)  # on every turn: it is part of the stable prompt prefix
        shown = sanitize(profile.text) if profile else ""
        if not state.retrieves:  # chit-chat, or the conversation holds the answer: nothing to recall
            return StageResult({"profile": shown}, "skipped", "retrieval skipped: profile only")
        query = state.plan.query.removesuffix(f" {state.personal}") if state.plan is not None else state.question
        reading = state.reading
        recalled = await self.recall.rank(user, query, now=time.time())
        ranked = [r for r in recalled if not in_history(r, state)]
        asked = Asked(
            question=reading,
            said_here=tuple(m.content for m in state.history if m.role == "user"),
            uncovered=state.uncovered,
            everyday=tuple(everyday_words(state.question, self.statistics)) if reading.about_user else (),
        )
        selection = select(ranked, asked, self.policy, TRACED)
        if reading.asks_what_user_said and not any(c.leads for c in selection.chosen) and len(ranked) < len(recalled):
            # "which python version do we run?" after "fyi we deploy ... with Python 3.12" in this conversation: what
            # the prompt still has verbatim answers it, when nothing else does (not "you haven't told me")
            selection = select(recalled, asked, self.policy, TRACED)
        records = tuple(record_of(c.recalled, c.shown, c.leads, c.reason) for c in selection.chosen)
        changes = {"profile": shown, "memory": records}  # injected ones are sources: the turn may answer from them
        return StageResult(changes, "ok", f"{selection.shown} of {len(ranked)} recalled items shown")

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "answered without memory"


class RememberTurn(Stage):
    """Writes the stored turn into the user's memory; the engine runs it after the answer, in the background."""

    name = "memory_write"
    reads = ("request", "history", "answer", "answer_source", "turn_index", "turn_time", "memory_epoch")
    writes = ()  # it writes the user's memory, not the turn
    counter = "memory_writer"

    def __init__(self, recorder: TurnRecorder, *, timeout_s: float) -> None:
        self.recorder = recorder
        self.timeout_s = timeout_s

    async def epoch(self, user_id: str) -> int:
        """The user's erase epoch, read when a turn begins: its write is dropped if an erase comes first."""
        return await self.recorder.store.epoch(user_id)

    @staticmethod
    def applies_to(request: TurnRequest) -> bool:
        """A temporary chat, or a turn that is not stored, leaves nothing."""
        return request.memory and request.conversation_id is not None

    def applies(self, state: TurnState) -> bool:
        return self.applies_to(state.request) and state.turn_index is not None

    async def run(self, state: TurnState) -> StageResult:
        assert state.turn_index is not None and state.request.conversation_id is not None
        previous = next((m.content for m in reversed(state.history) if m.role == "user"), "")
        turn = TurnToRemember(
            user_id=state.request.user_id,
            conversation_id=state.request.conversation_id,
            index=state.turn_index,
            question=state.request.question,
            time=state.turn_time if state.turn_time is not None else 0.0,
            context=previous,
            epoch=state.memory_epoch,
        )
        written = await self.recorder.record(turn)
        return StageResult({}, "ok", written.detail)

    def fallback(self, state: TurnState, failure: str) -> tuple[Changes, str]:
        return {}, "nothing remembered for this turn"
