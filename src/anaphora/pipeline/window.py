"""The conversation's window: which earlier turns the next prompt may show verbatim, and how they are shown.

:class:`WindowPolicy` is the rule, decided once from the settings and the chat model's capabilities
(:func:`anaphora.model_defaults.window_policy`); :class:`ConversationWindow` is this turn's earlier turns as one
value, built once from the stored turns. What the next turn needs of a stored turn is one of its explicit fields
(:attr:`~anaphora.store.protocols.StoredTurn.shown_passages`, :attr:`~anaphora.store.protocols.StoredTurn.
window_start`), written when the turn was stored; the stored trace is audit only and never read on the way to a
prompt (``tests/unit/pipeline/test_window_fields.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.pipeline.budget import HistoryWindow, VerbatimWindow, verbatim_window, window_start
from anaphora.store.protocols import StoredTurn
from anaphora.types import BudgetDecision, Message, Passage, PromptLayout


@dataclass(frozen=True, slots=True)
class WindowPolicy:
    """``max_turns`` verbatim turns at most; with ``cache_stable`` the window folds to ``min_turns`` when it would
    exceed them; ``excerpts``: each earlier turn is shown again with the passages it was answered from;
    ``summary``: turns that left the window are summarised (and the summary shown)."""

    layout: PromptLayout = "cache_stable"
    max_turns: int = 8
    min_turns: int = 4
    excerpts: bool = False
    summary: bool = True

    @property
    def stable(self) -> bool:
        """Whether the window goes on from where the previous turn's started (``cache_stable``)."""
        return self.layout == "cache_stable"


@dataclass(frozen=True, slots=True)
class ConversationWindow:
    """The earlier turns this turn may show, as one value built once when the turn starts (:meth:`from_stored`).

    Every index here is the conversation's (turn 0 first); :meth:`for_budget` is the one place they become
    indexes into the loaded history. ``loaded``: how many of the newest earlier turns the turn's history holds;
    ``previous_start``: where the previous turn's verbatim window started (None: unknown, e.g. stateless);
    ``summary_covers``: how many of the oldest turns the summary covers; ``excerpts``: per loaded turn, the
    passages its prompt showed (empty unless the policy shows excerpts)."""

    turns_before: int = 0
    loaded: int = 0
    previous_start: int | None = None
    summary_covers: int = 0
    excerpts: tuple[tuple[Passage, ...], ...] = ()

    @classmethod
    def from_stored(
        cls, turns: Sequence[StoredTurn], turns_before: int, policy: WindowPolicy, summary_covers: int = 0
    ) -> ConversationWindow:
        """From the stored turns the engine loaded (the newest ``policy.max_turns``)."""
        if not policy.stable:
            return cls(turns_before, len(turns), None, summary_covers)
        excerpts = tuple(tuple(t.shown_passages) for t in turns) if policy.excerpts else ()
        previous_start = turns[-1].window_start if turns else None
        return cls(turns_before, len(turns), previous_start, summary_covers, excerpts)

    @property
    def first_loaded(self) -> int:
        """Index of the oldest loaded turn."""
        return self.turns_before - self.loaded

    def rule(self, policy: WindowPolicy) -> VerbatimWindow:
        """The layout's window rule for this turn ('cache_stable': from where the previous window started, never
        showing what the summary already holds)."""
        return verbatim_window(
            self.turns_before,
            layout=policy.layout,
            max_turns=policy.max_turns,
            min_turns=policy.min_turns,
            previous=self._previous(policy),
        )

    def _previous(self, policy: WindowPolicy) -> int | None:
        if not policy.stable or self.previous_start is None:
            return None
        return max(self.previous_start, self.summary_covers)

    def for_budget(self, history: Sequence[Message], policy: WindowPolicy) -> HistoryWindow:
        """The window as :class:`~anaphora.pipeline.budget.PromptBudget` sees it, in indexes of ``history``."""
        rule = self.rule(policy)
        previous = self._previous(policy)
        return HistoryWindow(
            history=history,
            max_turns=self.turns_before - rule.start,
            layout=policy.layout,
            excerpts=self.excerpts,
            turns_folded=rule.folded,
            floor=max(rule.start, self.summary_covers) - self.first_loaded,
            previous_start=None
            if previous is None or self.previous_start is None
            else self.previous_start - self.first_loaded,
        )

    def summary_reach(self, decision: BudgetDecision | None, policy: WindowPolicy) -> int:
        """How many of the oldest turns the summary must cover for the next turn: those before the next turn's
        verbatim window (with 'cache_stable', a block boundary, so the summary changes only there), and those the
        budget evicted from this turn's prompt."""
        start = self.turns_before - decision.turns_kept if decision else self.turns_before  # this turn's start
        next_start = window_start(
            self.turns_before + 1,
            layout=policy.layout,
            max_turns=policy.max_turns,
            min_turns=policy.min_turns,
            previous=start if policy.stable and decision else None,
        )
        return max(next_start, start + (decision.turns_to_fold_next if decision else 0))
