"""What of the recalled memory a turn shows, and why: the policy the recall stage applies, in memory's own home.

:meth:`~anaphora.memory.recall.MemoryRecall.rank` orders a user's memories for a query; :func:`select` decides which
of them the prompt shows (at most ``k``), which lead the answer (the current facts a question about the user asks
for), and says for every one why it is shown or not. The pipeline's recall stage only adapts the turn to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from anaphora.memory.recall import Recalled
from anaphora.memory.types import MemoryItem
from anaphora.reading.coverage import asks
from anaphora.reading.extract import NO_LONGER
from anaphora.reading.message import Reading, read
from anaphora.reading.personal import ASKING_WORDS, evidence_for, fact_answers, on_topic, states_again
from anaphora.text import content_set, content_union, whole_word


@dataclass(frozen=True, slots=True)
class ShowPolicy:
    """``k``: memories shown at most; ``min_score``: the cosine similarity to the query one needs to be shown;
    ``fact_min_score``: what a fact needs for a question that asks what the user said (no shared word needed)."""

    k: int
    min_score: float
    fact_min_score: float


@dataclass(frozen=True, slots=True)
class Asked:
    """What the turn asks of memory: the question as read, the user's messages already in the prompt (an episode
    that says what they say adds nothing), the names no document mentions (then only a memory naming one answers),
    and the question's words the documents use everywhere (sharing one makes no fact relevant)."""

    question: Reading
    said_here: tuple[str, ...] = ()
    uncovered: tuple[str, ...] = ()
    everyday: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Chosen:
    recalled: Recalled
    shown: bool
    leads: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Selection:
    """The recalled memories in the order the prompt would show them (leading facts first), each with its verdict."""

    chosen: tuple[Chosen, ...] = field(default_factory=tuple)

    @property
    def shown(self) -> int:
        return sum(c.shown for c in self.chosen)


def leading(ranked: Sequence[Recalled], asked: Asked, policy: ShowPolicy) -> list[Recalled]:
    """The current facts a question about the user asks for, best first (none for other questions), but for one
    the question itself states: the user is saying it, not asking it."""
    facts = [r for r in ranked if r.item.kind == "fact" and r.item.current]
    question = asked.question
    if not question.about_user:
        return []
    said = question.asks_what_user_said  # then a fact close in meaning is shown without a shared word
    if not said:
        facts = [r for r in facts if not states_again(question.text, r.item.value)]
    found = [
        r
        for r in facts
        if fact_answers(question.text, r.item.text, r.item.value, asked.everyday)
        or (said and close_and_on_topic(r, question.words, policy.fact_min_score))
    ][: policy.k]
    if not said:
        return found
    # what the facts leave unsaid ("what broker and celery version do you have on file?" with a fact for the
    # version only) is in the user's own words, if anywhere
    unsaid = question.words - ASKING_WORDS - content_union(r.item.text for r in found)
    own = [
        r
        for r in stated_in_own_words(ranked, asked)
        if not found or (content_set(r.item.text) & unsaid and not any(same_turn(r.item, f.item) for f in found))
    ]
    return [*found, *own[:1]]


def same_turn(a: MemoryItem, b: MemoryItem) -> bool:
    """One was read from the other (a fact from the episode's turn): it says again a part of it."""
    return a.conversation_id == b.conversation_id and bool(set(a.turns) & set(b.turns))


def stated_in_own_words(ranked: Sequence[Recalled], asked: Asked) -> list[Recalled]:
    """For a question about what the user said that no current fact answers, the user's own statements (of their
    setup, or anything said without asking) that name what it asks about ("remind me which OS and shell I said I'm
    on?" and "I'm on a Windows 11 laptop and PowerShell 7 is my everyday shell", whose shell no fact rule read):
    the words that answer it. A statement's version answers a question about a version as a fact's value does
    ("which python version do we run?" and "we deploy on Debian, with Python 3.12")."""
    question = asked.question
    return [
        r
        for r in ranked
        if r.item.kind == "episode"
        and (read(r.item.text).states_setup or not asks(r.item.text))
        and fact_answers(question.text, r.item.text, r.item.text, asked.everyday)
    ]


def close_and_on_topic(recalled: Recalled, asked_words: frozenset[str], min_score: float) -> bool:
    """A fact close in meaning to a question that asks what the user said answers it without a shared everyday word,
    but not when the question names what it asks about and the fact names none of it: "which celery release are we
    on?" is not answered by the RabbitMQ version, whatever their similarity."""
    close = recalled.similarity is not None and recalled.similarity >= min_score
    return close and on_topic(asked_words, content_set(recalled.item.text))


def names_any(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` names one of ``names`` (as a word, in any case); true when there are none to name."""
    folded = text.casefold()
    return not names or any(whole_word(n.casefold()).search(folded) for n in names)


def verdict(recalled: Recalled, asked: Asked) -> str:
    """Why a memory may not be shown as evidence ('' when it may): a fact superseded since (unless the question asks
    about the past), an episode that is no evidence (an earlier question, the same problem reported again), or one
    that names none of what no document mentions."""
    item = recalled.item
    if item.kind == "fact" and not (item.current or asked.question.about_past):
        return "superseded since"
    if item.kind != "fact" and not evidence_for(asked.question, read(item.text), asked.said_here):
        return "no evidence for this question"
    if not names_any(item.text, asked.uncovered):
        return "names nothing the documents do not cover"
    return ""


def select(ranked: Sequence[Recalled], asked: Asked, policy: ShowPolicy, depth: int) -> Selection:
    """The first ``depth`` memories, leading facts first, each shown or not with its reason: a leading fact is shown;
    another memory when it is evidence, similar enough to the query and within ``k``."""
    first = leading(ranked, asked, policy)
    leads = {r.item.id for r in first}
    ordered = [*first, *(r for r in ranked if r.item.id not in leads)]
    outdated = set() if asked.question.about_past else outdated_episodes(ranked)
    chosen, shown = [], 0
    for recalled in ordered[:depth]:
        is_lead = recalled.item.id in leads
        reason = "what it says of the user was superseded since" if recalled.item.id in outdated else ""
        reason = reason or verdict(recalled, asked)
        close = recalled.similarity is not None and recalled.similarity >= policy.min_score
        if not reason and not (is_lead or close):
            reason = f"similarity under {policy.min_score:g}"
        if not reason and shown >= policy.k:
            reason = f"over the {policy.k} shown"
        shown += not reason
        chosen.append(Chosen(recalled, not reason, is_lead, reason or ("leads" if is_lead else "shown")))
    return Selection(tuple(chosen))


def outdated_episodes(ranked: Sequence[Recalled]) -> set[str]:
    """The ids of the episodes whose facts all name what the user said they no longer use: each was superseded by
    a current fact, recalled with it, that says so ("I'm on a Windows 11 laptop" after "I'm on macOS now, no more
    Windows"). A newer value is no such word (the episode of an older version still says what happened then; LoCoMo
    memory recall@10 0.7782 -> 0.7765 when those were left out too). A fact is read from the turn its episode
    holds, so the two come up for the same words."""
    facts = [r.item for r in ranked if r.item.kind == "fact"]
    dropped = {f.attribute for f in facts if f.current and f.value.startswith(NO_LONGER)}

    def untrue(fact: MemoryItem) -> bool:
        return not fact.current and fact.attribute in dropped

    out = set()
    for episode in (r for r in ranked if r.item.kind == "episode"):
        read_from = [f for f in facts if same_turn(episode.item, f)]
        if read_from and all(untrue(f) for f in read_from):
            out.add(episode.item.id)
    return out
