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


def plan_prompt(
    *,
    count: TokenCounter,
    budget: int,
    history_budget: int,
    max_turns: int,
    system: str,
    summary: str,
    history: Sequence[Message],
    passages: Sequence[Passage],
    question: str,
    passage_text: Callable[[Passage], str],
    framing: str = "",
    summary_label: str = "",
    layout: PromptLayout = "sliding",
    turns_folded: int = 0,
    memories: Sequence[Passage] = (),
    memory_budget: int = 0,
    memory_framing: str = "",
    history_excerpts: Sequence[Sequence[Passage]] = (),
    excerpt_text: Callable[[Sequence[Passage], Collection[str]], str] | None = None,
    floor: int = 0,
    previous_start: int | None = None,
    answer_reserve: int = 0,
) -> PromptPlan:
    """Fit everything into ``budget`` tokens; ``history`` is user/assistant pairs, oldest first, of which the newest
    ``max_turns`` may be verbatim. ``framing`` is the fixed text around the question and passages (context fences,
    labels); ``summary_label`` introduces a summary; ``memories`` (formatted by ``passage_text`` too) get at most
    ``memory_budget`` tokens with their ``memory_framing``. ``history_excerpts`` (one entry per turn of ``history``,
    or none) are the passages each earlier turn showed; a verbatim turn shows them again as
    ``excerpt_text(passages, ids older verbatim turns show)`` renders them, and costs that. With ``cache_stable``,
    ``floor`` is the index in ``history`` of the oldest turn the window may show (where the previous turn's window
    started, or the end of the summary), ``previous_start`` the index where the previous turn's window started
    (then ``turns_folded`` counts the turns that left the window since, whatever moved it) and ``answer_reserve``
    the answer's cap, to foresee the next turn's fold. ``layout`` and ``turns_folded`` (else the window rule's) are
    recorded in the decision."""
    cost = lambda text: count(text) + MESSAGE_OVERHEAD  # noqa: E731
    system_cost, question_cost = cost(system), cost(question) + count(framing)
    if system_cost + question_cost > budget:
        raise InputError(
            f"the question is too long: {question_cost} tokens, with {budget - system_cost} available",
            hint="shorten the question, or raise ANAPHORA_CONTEXT_WINDOW for a model with a longer context",
        )
    remaining = budget - system_cost - question_cost
    kept_passages: list[Passage] = []
    passage_cost = 0
    for passage in passages:  # protected, best first; only what cannot fit at all is dropped
        tokens = count(passage_text(passage)) + 2
        if passage_cost + tokens > remaining:
            break
        kept_passages.append(passage)
        passage_cost += tokens
    remaining -= passage_cost
    kept_memories: list[Passage] = []
    memory_cost = count(memory_framing) if memories else 0
    memory_room = min(remaining, memory_budget)
    for memory in memories:  # best first, within their cap
        tokens = count(passage_text(memory)) + 2
        if memory_cost + tokens > memory_room:
            break
        kept_memories.append(memory)
        memory_cost += tokens
    memory_cost = memory_cost if kept_memories else 0
    remaining -= memory_cost
    history_room = min(remaining, history_budget)

    turns = [list(history[i : i + 2]) for i in range(0, len(history), 2)]
    if history_excerpts and len(history_excerpts) != len(turns):
        raise ValueError(f"history_excerpts: {len(history_excerpts)} entries for {len(turns)} turns")
    excerpts = [tuple(e) for e in history_excerpts] or [()] * len(turns)
    window_size = min(len(turns), max_turns) if max_turns else 0
    beyond_window = len(turns) - window_size
    summary_text = summary
    summary_cost = cost(summary_label + summary) if summary else 0
    truncated = False
    if summary and summary_cost > history_room // 2:  # the summary may take at most half of the history room
        room_for_text = max(0, history_room // 2 - MESSAGE_OVERHEAD - count(summary_label))
        summary_text = truncate_to_tokens(summary, room_for_text, count)
        summary_cost = cost(summary_label + summary_text) if summary_text else 0
        truncated = True
    room = history_room - summary_cost

    # each turn's own words, then what its excerpts add where it is shown again (which depends on older turns shown)
    words = [sum(cost(m.content) for m in turn) for turn in turns]
    words.append(cost(question) + answer_reserve + MESSAGE_OVERHEAD)  # this turn, as the next turn will show it
    excerpts.append(tuple(kept_passages))
    excerpt_tokens = functools.cache(count)  # the same turn's excerpts are costed for several candidate starts

    def window_from(start: int, stop: int) -> int:
        """The cost of turns ``start``...``stop - 1`` verbatim, each with the excerpts it showed."""
        shown: set[str] = set()
        tokens = 0
        for index in range(start, stop):
            tokens += words[index]
            if excerpts[index] and excerpt_text is not None:
                tokens += excerpt_tokens(excerpt_text(excerpts[index], shown))
            shown.update(p.id for p in excerpts[index])
        return tokens

    def fold(first: int, stop: int, limit: int) -> tuple[int, int]:
        """The oldest start from ``first`` on whose turns up to ``stop`` cost at most ``limit``, and their cost."""
        for candidate in range(first, stop):
            if (tokens := window_from(candidate, stop)) <= limit:
                return candidate, tokens
        return stop, 0

    # 'cache_stable' keeps the window from where the previous turn's started (``floor``) while it fits; when it no
    # longer does, it folds the oldest turns until the rest fit in half the room, so it can grow again for several
    # turns. 'sliding' keeps the longest run of newest turns that fits, every turn.
    blocks = layout == "cache_stable"
    first = max(len(turns) - window_size, min(floor, len(turns)) if blocks else 0)
    start, history_cost = fold(first, len(turns), room)
    if blocks and start > first:
        start, history_cost = fold(first, len(turns), int(room * REFILL_FROM))
    next_start = start  # where the next turn's window will start, so the summary can be ready for it
    if blocks and window_from(start, len(turns) + 1) > room:
        next_start, _ = fold(start, len(turns) + 1, int(room * REFILL_FROM))
    kept, kept_excerpts = turns[start:], excerpts[start : len(turns)]
    in_history = {p.id for turn_excerpts in kept_excerpts for p in turn_excerpts}
    shown_earlier = sum(1 for p in kept_passages if p.id in in_history)
    decision = BudgetDecision(
        budget=budget,
        used=system_cost + question_cost + passage_cost + memory_cost + summary_cost + history_cost,
        system=system_cost,
        summary=summary_cost,
        question=question_cost,
        passages=passage_cost,
        history=history_cost,
        passages_kept=len(kept_passages),
        passages_dropped=len(passages) - len(kept_passages),
        turns_available=len(turns),
        turns_kept=len(kept),
        turns_evicted_for_budget=window_size - len(kept),
        turns_beyond_window=beyond_window,
        summary_truncated=truncated,
        layout=layout,
        turns_folded=turns_folded if previous_start is None else max(0, start - previous_start),
        memory=memory_cost,
        memory_kept=len(kept_memories),
        passages_shown_earlier=shown_earlier,
        turns_to_fold_next=next_start - start,
    )
    history_messages = [m for turn in kept for m in turn]
    return PromptPlan(history_messages, kept_passages, summary_text, decision, kept_memories, kept_excerpts)
