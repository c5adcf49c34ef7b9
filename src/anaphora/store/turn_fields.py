"""Fields of a stored turn read the same way by several stores: the vote a SQL store joins to a turn row
(:func:`feedback_of`), and the next-turn fields of a turn stored before they were explicit, derived once from its
stored trace (:func:`fields_from_trace`).

Before schema step ``m006_turn_window_fields`` (SQLite) / ``m003_turn_window_fields`` (PostgreSQL), the next turn
read a stored turn's shown passages (``trace.retrieved`` up to ``trace.budget.passages_kept``, none when the turn
skipped retrieval or abstained) and its window start (its index less ``trace.budget.turns_kept``) from the trace.
Those migrations write the fields from the trace once; the Redis store, which keeps no schema version, derives
them when it reads a turn written before them. This reads the stored JSON as that version wrote it, not
:class:`~anaphora.types.TurnTrace`, so a later change to the trace model never changes what an old turn gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from anaphora.store.protocols import Feedback


def fields_from_trace(trace: Mapping[str, Any] | None, index: int) -> tuple[list[Any], int | None]:
    """(shown passages as stored JSON, window start) of the turn at ``index`` whose stored trace is ``trace``."""
    budget = trace.get("budget") if trace else None
    if not trace or not budget:
        return [], None
    start = max(0, index - int(budget["turns_kept"]))
    if trace.get("retrieval_skipped") or trace.get("abstained"):
        return [], start
    return list(trace.get("retrieved") or [])[: int(budget["passages_kept"])], start


def feedback_of(row: Mapping[str, Any], seconds: Callable[[Any], float] = float) -> Feedback | None:
    """The vote a SQL store joined to a turn row (columns ``fb_user``, ``fb_vote``, ``fb_comment``, ``fb_created``,
    ``fb_updated``; none when there is no vote); ``seconds`` reads the store's timestamps as Unix seconds."""
    if row["fb_vote"] is None:
        return None
    return Feedback(
        user_id=row["fb_user"],
        vote=row["fb_vote"],
        comment=row["fb_comment"],
        created_at=seconds(row["fb_created"]),
        updated_at=seconds(row["fb_updated"]),
    )
