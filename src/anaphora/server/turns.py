"""Admission and ordering of turns, and their lifetime independent of the HTTP response.

- A user has at most ``max_per_user`` turns in flight (running, or waiting for an earlier turn of the same
  conversation); one more is refused with :class:`RateLimitError` at once, never queued.
- Turns of one conversation run one at a time, in arrival order (a per-conversation ``asyncio.Lock``), so each turn
  sees the previous one in its history and indexes follow the order of the requests.
- Each turn runs in its own task that the server never cancels: a client that disconnects or stops reading does not
  stop its turn from being stored. The user's slot and the conversation's lock are released when the turn ends,
  not when the response does, and shutdown waits for the turns still in flight.

The locks live in this process: several replicas behind one store keep gap-free indexes (the store appends
atomically) but do not order concurrent turns of one conversation across replicas.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from anaphora.errors import AnaphoraError, RateLimitError
from anaphora.pipeline.engine import Engine, TurnRequest, TurnStream
from anaphora.types import TurnResult

log = logging.getLogger("anaphora.server")
Key = tuple[str, str]


class Turn:
    """A started turn: its text deltas (optional to read) and its result."""

    def __init__(self, stream: TurnStream, task: asyncio.Task[TurnResult]) -> None:
        self.deltas: AsyncIterator[str] = aiter(stream)
        self.task = task

    async def result(self) -> TurnResult:
        """The stored result; cancelling the caller does not cancel the turn."""
        return await asyncio.shield(self.task)


class _Locks:
    """One FIFO lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._entries: dict[Key, tuple[asyncio.Lock, list[int]]] = {}

    async def acquire(self, key: Key) -> None:
        lock, users = self._entries.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise

    def release(self, key: Key) -> None:
        self._entries[key][0].release()
        self._forget(key)

    def _forget(self, key: Key) -> None:
        _, users = self._entries[key]
        users[0] -= 1
        if users[0] == 0:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def held(self) -> list[Key]:
        return list(self._entries)


class TurnRunner:
    def __init__(self, engine: Engine, *, max_per_user: int) -> None:
        self.engine = engine
        self.max_per_user = max_per_user
        self._per_user: dict[str, int] = {}
        self._locks = _Locks()
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def in_flight_for(self, user_id: str) -> int:
        return self._per_user.get(user_id, 0)

    def busy_conversations(self) -> set[str]:
        """Conversations with a turn (or a delete) running or waiting."""
        return {conversation_id for _, conversation_id in self._locks.held()}

    async def start(self, request: TurnRequest) -> Turn:
        """Admit the turn (or raise :class:`RateLimitError`), wait for its conversation, start it."""
        user = request.user_id
        if self._per_user.get(user, 0) >= self.max_per_user:
            raise RateLimitError(
                f"too many turns in flight for this user (at most {self.max_per_user} at once)",
                hint="wait for an answer before sending the next question, then retry",
                retry_after_s=1.0,
            )
        self._per_user[user] = self._per_user.get(user, 0) + 1
        key = (user, request.conversation_id) if request.conversation_id is not None else None
        locked = False
        try:
            if key is not None:
                await self._locks.acquire(key)
                locked = True
            stream = self.engine.stream(request)
        except BaseException:
            if locked:
                self._locks.release(key)  # type: ignore[arg-type]
            self._leave(user)
            raise
        task = asyncio.get_running_loop().create_task(stream.result())
        self._tasks.add(task)
        task.add_done_callback(partial(self._finished, user, key))
        return Turn(stream, task)

    @asynccontextmanager
    async def conversation(self, user_id: str, conversation_id: str) -> AsyncIterator[None]:
        """Hold a conversation's lock (e.g. to delete it after its in-flight turns)."""
        key = (user_id, conversation_id)
        await self._locks.acquire(key)
        try:
            yield
        finally:
            self._locks.release(key)

    async def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the turns in flight; returns how many are still running."""
        if not self._tasks:
            return 0
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return len(pending)

    def _finished(self, user: str, key: Key | None, task: asyncio.Task[TurnResult]) -> None:
        self._tasks.discard(task)
        if key is not None:
            self._locks.release(key)
        self._leave(user)
        if task.cancelled():
            log.warning("a turn was cancelled before it was stored")
            return
        error = task.exception()  # also marks it retrieved when no client is left to read it
        if error is not None and not isinstance(error, AnaphoraError):
            log.error("a turn failed", exc_info=error)

    def _leave(self, user: str) -> None:
        count = self._per_user.get(user, 0) - 1
        if count > 0:
            self._per_user[user] = count
        else:
            self._per_user.pop(user, None)
