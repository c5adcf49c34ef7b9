"""The conversation's window: which earlier turns the next prompt may show verbatim, and how they are shown.

:class:`WindowPolicy` is the rule, decided once from the settings and the chat model's capabilities
(:func:`anaphora.model_defaults.window_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from anaphora.types import PromptLayout


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
