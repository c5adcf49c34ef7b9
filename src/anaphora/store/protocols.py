"""Store interfaces. SQLite, PostgreSQL and Redis implement them; every backend must keep the same rules, which the
contract suites in :mod:`anaphora.testing` check (conversations, sessions, turn locks)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


@dataclass
class Session:
    """A user's server-side session: what the service holds between requests, independent of the token."""

    id: str
    user_id: str
    started_at: float
    last_seen: float


class SessionStore(Protocol):
    """Server-side sessions, one per user, ended by ``ttl_s`` seconds of inactivity or by logout.

    Rules: ``touch`` returns the user's live session with ``last_seen`` set to now, or starts a fresh one (a new id)
    when there is none or it has been idle for longer than ``ttl_s``; concurrent touches of one user, from any
    number of processes sharing the store, agree on one session. ``logout`` ends it and returns what it was.
    Nothing persisted belongs to a session, so expiry loses no conversation.
    """

    ttl_s: float

    async def touch(self, user_id: str) -> Session: ...

    async def logout(self, user_id: str) -> Session | None: ...

    async def aclose(self) -> None: ...


LockKey = tuple[str, str]  # (user_id, conversation_id)


class Lease(Protocol):
    """A held turn lock; release it exactly once, when the turn (or delete) is over."""

    async def release(self) -> None: ...


class TurnLock(Protocol):
    """Mutual exclusion per conversation, so its turns run one at a time and each sees the previous one.

    Rules: at most one lease per key is held at a time among all the processes sharing the lock; waiters in one
    process are served in arrival order; a waiter that is cancelled leaves no lease behind; a lease held by a
    process that died is freed by itself (a lease that expires unless renewed, or a session the server drops), so
    a crashed replica never blocks a conversation for good.
    """

    async def acquire(self, key: LockKey) -> Lease: ...

    def busy(self) -> set[LockKey]:
        """Keys this process holds or waits for (the history sweeper spares their conversations)."""
        ...

    async def aclose(self) -> None: ...
