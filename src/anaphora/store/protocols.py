"""Store interfaces. SQLite and (for conversations) PostgreSQL implement them; every backend must keep the same
rules, which the contract suite :mod:`anaphora.testing.store_contract` checks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from anaphora.types import Citation, TurnTrace


class Conversation(BaseModel):
    id: str
    user_id: str
    title: str
    created_at: float
    updated_at: float
    turn_count: int = 0


class StoredTurn(BaseModel):
    index: int
    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    trace: TurnTrace | None = None
    created_at: float


class ConversationStore(Protocol):
    """Conversations and their turns, owned by a user.

    Rules: a turn (question + answer + citations + trace) is appended atomically or not at all; turn indexes are
    0, 1, 2, ... without gaps; every read and write is scoped to ``user_id`` and an id owned by another user is
    reported as missing (:class:`anaphora.errors.NotFoundError`), never revealed.
    """

    async def create(self, user_id: str, title: str = "") -> Conversation: ...

    async def get(self, user_id: str, conversation_id: str) -> Conversation: ...

    async def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]: ...

    async def turns(self, user_id: str, conversation_id: str, *, last: int | None = None) -> list[StoredTurn]: ...

    async def append_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        citations: Sequence[Citation],
        trace: TurnTrace,
    ) -> StoredTurn: ...

    async def delete(self, user_id: str, conversation_id: str) -> None: ...

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Right to erase: delete all of ``user_id``'s conversations with their turns and summaries, atomically.
        Returns ``{"conversations": n, "turns": n, "summaries": n}``."""
        ...

    async def delete_inactive(self, before_ts: float, *, keep: Iterable[str] = ()) -> dict[str, int]:
        """History TTL: delete every conversation last active (``updated_at``) strictly before ``before_ts``, except
        those named in ``keep``, with their turns and summaries, atomically. Returns the counts as ``erase_user``."""
        ...


class EmbeddingCache(Protocol):
    """Vectors keyed by a hash of (embedder name, text). Misses are returned as absent keys."""

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put_many(self, items: dict[str, np.ndarray]) -> None: ...

    def delete_many(self, keys: Sequence[str]) -> int: ...


class Summary(BaseModel):
    covers_turns: int
    text: str
    created_at: float


class SummaryStore(Protocol):
    """Rolling summaries of a conversation's older turns. Saving never touches the turns themselves; every
    version is kept and the one covering the most turns is current."""

    async def summary(self, user_id: str, conversation_id: str) -> Summary | None: ...

    async def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None: ...
