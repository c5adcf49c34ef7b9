"""One token budget for the whole generation prompt.

Priority, in order: (1) the system prompt, the question and this turn's retrieved passages are protected (only
when they alone overflow are the lowest-ranked passages dropped; the question never is); recalled long-term
memories come next, best first, within their own cap (``memory_budget``); (2) the oldest verbatim
turns are evicted first; (3) the summary of evicted turns fills in for them (the summarizer is told how far it
must reach); (4) at most ``history_turns`` turns are verbatim. The decision is recorded in the turn's trace.

Which turns may be verbatim is the layout's window rule (:func:`verbatim_window`): ``cache_stable`` lets the window
grow to ``history_turns`` and then drops it to ``history_min_turns`` in one block, so the prompt's start (system
prompt, summary, the oldest verbatim turns) stays byte-identical between folds; ``sliding`` drops one turn per turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from anaphora.errors import InputError
from anaphora.types import BudgetDecision, Message, Passage, PromptLayout

TokenCounter = Callable[[str], int]
MESSAGE_OVERHEAD = 4  # role markers a chat template adds around each message
REFILL_FROM = 0.5  # 'cache_stable': a window that overflows is folded to this share of the room, then grows again


@dataclass(frozen=True, slots=True)
class PromptPlan:
    """``history_excerpts``: per kept turn (oldest first), the passages it showed when it was asked."""

    history: list[Message]
    passages: list[Passage]
    summary: str
    decision: BudgetDecision
    memories: list[Passage] = field(default_factory=list)
    history_excerpts: list[tuple[Passage, ...]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class VerbatimWindow:
    """The earlier turns that may be verbatim: those from index ``start`` on (older ones are the summary's);
    ``folded``: how many left the window at this turn."""

    start: int
    folded: int


def window_start(
    turns_before: int, *, layout: PromptLayout, max_turns: int, min_turns: int, previous: int | None = None
) -> int:
    """Index of the oldest turn that may be verbatim when ``turns_before`` turns came before this one. With
    ``cache_stable`` and ``previous`` (where the previous turn's window started, whatever moved it there) the window
    keeps that start until it would exceed ``max_turns``, then drops to ``min_turns``; without it, the same rule on
    a fixed grid of blocks."""
    if layout == "cache_stable" and previous is not None:  # a budget fold may have moved it before max_turns
        return previous if turns_before - previous <= max_turns else turns_before - min_turns
    if turns_before <= max_turns:
        return 0
    if layout == "sliding":
        return turns_before - max_turns
    block = max_turns - min_turns + 1  # the window runs min_turns ... max_turns, then folds a block
    return (turns_before - min_turns) // block * block


def verbatim_window(
    turns_before: int, *, layout: PromptLayout, max_turns: int, min_turns: int, previous: int | None = None
) -> VerbatimWindow:
    start = window_start(turns_before, layout=layout, max_turns=max_turns, min_turns=min_turns, previous=previous)
    if previous is None:
        previous = window_start(max(0, turns_before - 1), layout=layout, max_turns=max_turns, min_turns=min_turns)
    return VerbatimWindow(start, max(0, start - previous))


def truncate_to_tokens(text: str, limit: int, count: TokenCounter) -> str:
    """The longest prefix of whole sentences of ``text`` within ``limit`` tokens, else of whole words."""
    if count(text) <= limit:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    kept = ""
    for sentence in sentences:
        candidate = f"{kept} {sentence}".strip()
        if count(candidate) > limit:
            break
        kept = candidate
    if kept:
        return kept
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # binary search on the word count
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


@dataclass(frozen=True, slots=True)
class PromptParts:
    """What this turn's prompt is made of. ``framing`` is the fixed text around the question and passages
    (context fences, labels); ``summary_label`` introduces a summary; ``memories`` come with their
    ``memory_framing``."""

    system: str
    question: str
    passages: Sequence[Passage] = ()
    summary: str = ""
    framing: str = ""
    summary_label: str = ""
    memories: Sequence[Passage] = ()
    memory_framing: str = ""


@dataclass(frozen=True, slots=True)
class PromptLimits:
    """``budget`` tokens for the whole prompt, of which at most ``history_budget`` for the summary and the verbatim
    turns and ``memory_budget`` for recalled memories; ``answer_reserve``: the answer's cap, to foresee the next
    turn's fold."""

    budget: int
    history_budget: int
    memory_budget: int = 0
    answer_reserve: int = 0


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """The earlier turns as the budget sees them: ``history`` is user/assistant pairs, oldest first, of which the
    newest ``max_turns`` may be verbatim; ``excerpts`` (one entry per turn, or none) the passages each showed. With
    ``cache_stable``, ``floor`` is the index in ``history`` of the oldest turn the window may show (where the
    previous turn's window started, or the end of the summary) and ``previous_start`` the index where the previous
    turn's window started (then ``turns_folded`` counts the turns that left the window since, whatever moved it)."""

    history: Sequence[Message]
    max_turns: int
    layout: PromptLayout = "sliding"
    excerpts: Sequence[Sequence[Passage]] = ()
    turns_folded: int = 0
    floor: int = 0
    previous_start: int | None = None


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The protected part's costs and what was kept of the passages and memories."""

    system: int
    question: int
    passages: list[Passage]
    passage_cost: int
    memories: list[Passage]
    memory_cost: int


class PromptBudget:
    """Fits a turn's prompt into its limits: the protected part (system prompt, question, passages), then
    memories within their cap, then the summary (at most half the history room), then as many verbatim turns as
    fit, with the layout's window rule. ``passage_text`` formats a passage or memory as the prompt shows it;
    ``excerpt_text(passages, ids older verbatim turns show)`` an earlier turn's excerpts."""

    def __init__(
        self,
        count: TokenCounter,
        passage_text: Callable[[Passage], str],
        excerpt_text: Callable[[Sequence[Passage], Collection[str]], str] | None = None,
    ) -> None:
        self.count = count
        self.passage_text = passage_text
        self.excerpt_text = excerpt_text

    def cost(self, text: str) -> int:
        return self.count(text) + MESSAGE_OVERHEAD

    def plan(self, parts: PromptParts, limits: PromptLimits, window: HistoryWindow) -> PromptPlan:
        fixed = self._fixed(parts, limits)
        remaining = limits.budget - fixed.system - fixed.question - fixed.passage_cost - fixed.memory_cost
        history_room = min(remaining, limits.history_budget)
        summary, summary_cost, truncated = self._summary(parts, history_room)
        turns, excerpts = self._turns(window)
        excerpts.append(tuple(fixed.passages))  # this turn, as the next turn will show it
        window_size = min(len(turns), window.max_turns) if window.max_turns else 0
        words = [sum(self.cost(m.content) for m in turn) for turn in turns]
        words.append(self.cost(parts.question) + limits.answer_reserve + MESSAGE_OVERHEAD)
        fit = _WindowFit(self, words, excerpts)
        start, history_cost, next_start = fit.choose(window, len(turns) - window_size, history_room - summary_cost)
        kept, kept_excerpts = turns[start:], excerpts[start : len(turns)]
        in_history = {p.id for turn_excerpts in kept_excerpts for p in turn_excerpts}
        decision = BudgetDecision(
            budget=limits.budget,
            used=fixed.system + fixed.question + fixed.passage_cost + fixed.memory_cost + summary_cost + history_cost,
            system=fixed.system,
            summary=summary_cost,
            question=fixed.question,
            passages=fixed.passage_cost,
            history=history_cost,
            passages_kept=len(fixed.passages),
            passages_dropped=len(parts.passages) - len(fixed.passages),
            turns_available=len(turns),
            turns_kept=len(kept),
            turns_evicted_for_budget=window_size - len(kept),
            turns_beyond_window=len(turns) - window_size,
            summary_truncated=truncated,
            layout=window.layout,
            turns_folded=window.turns_folded
            if window.previous_start is None
            else max(0, start - window.previous_start),
            memory=fixed.memory_cost,
            memory_kept=len(fixed.memories),
            passages_shown_earlier=sum(1 for p in fixed.passages if p.id in in_history),
            turns_to_fold_next=next_start - start,
        )
        history = [m for turn in kept for m in turn]
        return PromptPlan(history, fixed.passages, summary, decision, fixed.memories, kept_excerpts)

    def _fixed(self, parts: PromptParts, limits: PromptLimits) -> _Fixed:
        """The protected part: the system prompt and the question (an oversize question is refused), this turn's
        passages best first (only what cannot fit at all is dropped), then memories within their cap."""
        system_cost, question_cost = self.cost(parts.system), self.cost(parts.question) + self.count(parts.framing)
        if system_cost + question_cost > limits.budget:
            raise InputError(
                f"the question is too long: {question_cost} tokens, with {limits.budget - system_cost} available",
                hint="shorten the question, or raise ANAPHORA_CONTEXT_WINDOW for a model with a longer context",
            )
        remaining = limits.budget - system_cost - question_cost
        passages, passage_cost = self._fill(parts.passages, 0, remaining)
        remaining -= passage_cost
        framing = self.count(parts.memory_framing) if parts.memories else 0
        memories, memory_cost = self._fill(parts.memories, framing, min(remaining, limits.memory_budget))
        return _Fixed(system_cost, question_cost, passages, passage_cost, memories, memory_cost if memories else 0)

    def _fill(self, passages: Sequence[Passage], used: int, room: int) -> tuple[list[Passage], int]:
        """The longest run of ``passages``, best first, that fits ``room`` with ``used`` tokens already taken."""
        kept: list[Passage] = []
        for passage in passages:
            tokens = self.count(self.passage_text(passage)) + 2
            if used + tokens > room:
                break
            kept.append(passage)
            used += tokens
        return kept, used

    def _summary(self, parts: PromptParts, history_room: int) -> tuple[str, int, bool]:
        """The summary as shown (truncated to half the history room at most), its cost, whether it was cut."""
        summary, label = parts.summary, parts.summary_label
        if not summary:
            return summary, 0, False
        cost = self.cost(label + summary)
        if cost <= history_room // 2:
            return summary, cost, False
        room_for_text = max(0, history_room // 2 - MESSAGE_OVERHEAD - self.count(label))
        summary = truncate_to_tokens(summary, room_for_text, self.count)
        return summary, (self.cost(label + summary) if summary else 0), True

    @staticmethod
    def _turns(window: HistoryWindow) -> tuple[list[list[Message]], list[tuple[Passage, ...]]]:
        turns = [list(window.history[i : i + 2]) for i in range(0, len(window.history), 2)]
        if window.excerpts and len(window.excerpts) != len(turns):
            raise ValueError(f"history_excerpts: {len(window.excerpts)} entries for {len(turns)} turns")
        return turns, [tuple(e) for e in window.excerpts] or [()] * len(turns)


class _WindowFit:
    """Where the verbatim window starts: the cost of a run of turns, each with the excerpts it showed (which
    depends on the older turns shown), and the fold that fits it."""

    def __init__(self, budget: PromptBudget, words: list[int], excerpts: list[tuple[Passage, ...]]) -> None:
        self.budget = budget
        self.words = words  # per turn (this one last): its own words
        self.excerpts = excerpts
        self._excerpt_tokens = functools.cache(budget.count)  # the same excerpts are costed for several starts

    def cost(self, start: int, stop: int) -> int:
        """The cost of turns ``start``...``stop - 1`` verbatim, each with the excerpts it showed."""
        shown: set[str] = set()
        tokens = 0
        render = self.budget.excerpt_text
        for index in range(start, stop):
            tokens += self.words[index]
            if self.excerpts[index] and render is not None:
                tokens += self._excerpt_tokens(render(self.excerpts[index], shown))
            shown.update(p.id for p in self.excerpts[index])
        return tokens

    def fold(self, first: int, stop: int, limit: int) -> tuple[int, int]:
        """The oldest start from ``first`` on whose turns up to ``stop`` cost at most ``limit``, and their cost."""
        for candidate in range(first, stop):
            if (tokens := self.cost(candidate, stop)) <= limit:
                return candidate, tokens
        return stop, 0

    def choose(self, window: HistoryWindow, beyond: int, room: int) -> tuple[int, int, int]:
        """(start, cost, the next turn's start). 'cache_stable' keeps the window from where the previous turn's
        started (``floor``) while it fits; when it no longer does, it folds the oldest turns until the rest fit in
        half the room, so it can grow again for several turns, and foresees the next turn's fold. 'sliding' keeps
        the longest run of newest turns that fits, every turn."""
        turns = len(self.words) - 1
        blocks = window.layout == "cache_stable"
        first = max(beyond, min(window.floor, turns) if blocks else 0)
        start, cost = self.fold(first, turns, room)
        if blocks and start > first:
            start, cost = self.fold(first, turns, int(room * REFILL_FROM))
        next_start = start
        if blocks and self.cost(start, turns + 1) > room:
            next_start, _ = self.fold(start, turns + 1, int(room * REFILL_FROM))
        return start, cost, next_start
