"""Dependencies shared by the routes."""

from __future__ import annotations

from anaphora.errors import InputError
from anaphora.server.state import Admin, Svc, User, VisitorTurn, memory_allowed, refuse_visitors

__all__ = ["Admin", "Svc", "User", "VisitorTurn", "check_length", "memory_allowed", "refuse_visitors"]


def check_length(text: str, limit: int, where: str) -> None:
    if len(text) > limit:
        raise InputError(
            f"{where} has {len(text)} characters, more than the {limit} allowed",
            hint="shorten it (the limit is the max_message_chars setting)",
            param=where,
            code="string_above_max_length",
        )
