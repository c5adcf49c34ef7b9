"""The next-turn fields of a turn stored before they were explicit: derived once from its stored trace.

Before schema step ``m006_turn_window_fields`` (SQLite) / ``m003_turn_window_fields`` (PostgreSQL), the next turn
read a stored turn's shown passages (``trace.retrieved`` up to ``trace.budget.passages_kept``, none when the turn
skipped retrieval or abstained) and its window start (its index less ``trace.budget.turns_kept``) from the trace.
Those migrations write the fields from the trace once; the Redis store, which keeps no schema version, derives
them when it reads a turn written before them. This reads the stored JSON as that version wrote it, not
:class:`~anaphora.types.TurnTrace`, so a later change to the trace model never changes what an old turn gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fields_from_trace(trace: Mapping[str, Any] | None, index: int) -> tuple[list[Any], int | None]:
    """(shown passages as stored JSON, window start) of the turn at ``index`` whose stored trace is ``trace``."""
    budget = trace.get("budget") if trace else None
    if not trace or not budget:
        return [], None
    start = max(0, index - int(budget["turns_kept"]))
    if trace.get("retrieval_skipped") or trace.get("abstained"):
        return [], start
    return list(trace.get("retrieved") or [])[: int(budget["passages_kept"])], start
