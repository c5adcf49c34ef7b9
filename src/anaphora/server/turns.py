"""Admission and ordering of turns, and their lifetime independent of the HTTP response.

- A user has at most ``max_per_user`` turns in flight (running, or waiting for an earlier turn of the same
  conversation); one more is refused with :class:`RateLimitError` at once, never queued.
- Turns of one conversation run one at a time, in arrival order, so each turn sees the previous one in its history
  and indexes follow the order of the requests. The :class:`~anaphora.store.protocols.TurnLock` decides how far
  that holds: within this process (:class:`~anaphora.store.locks.ProcessTurnLock`, the default), or across every
  replica sharing the store (:class:`~anaphora.store.locks.SharedTurnLock` over Redis or PostgreSQL; arrival order
  then holds within each replica, and turns from different replicas take turns).
- Each turn runs in its own task that the server never cancels: a client that disconnects or stops reading does not
  stop its turn from being stored. The user's slot and the conversation's lock are released when the turn ends,
  not when the response does, and shutdown waits for the turns still in flight.

The per-user limit counts the turns in flight in this process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from anaphora.errors import AnaphoraError, RateLimitError
from anaphora.pipeline.engine import Engine, TurnRequest, TurnStream
from anaphora.store.locks import ProcessTurnLock
from anaphora.store.protocols import Lease, TurnLock
from anaphora.types import TurnResult

log = logging.getLogger("anaphora.server")


class EngineClock:
    """When the engine started a turn and when it returned the turn's stored result."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.finished: float | None = None


class Turn:
    """A started turn: its text deltas (optional to read) and its result."""

    def __init__(self, stream: TurnStream, task: asyncio.Task[TurnResult], clock: EngineClock) -> None:
        self.deltas: AsyncIterator[str] = aiter(stream)
        self.task = task
        self.clock = clock

    async def result(self) -> TurnResult:
        """The stored result; cancelling the caller does not cancel the turn."""
        return await asyncio.shield(self.task)

    @property
    def engine_ms(self) -> float | None:
        """The engine's own time for the turn, from its start (after admission and the conversation's lock) to its
        stored result: loading the history, the stages, storing the turn. None until it finished."""
        finished = self.clock.finished
        return None if finished is None else (finished - self.clock.started) * 1000


class TurnRunner:
    def __init__(self, engine: Engine, *, max_per_user: int, lock: TurnLock | None = None) -> None:
        self.engine = engine
        self.max_per_user = max_per_user
        self.lock: TurnLock = lock if lock is not None else ProcessTurnLock()
        self._per_user: dict[str, int] = {}
        self._tasks: set[asyncio.Task[TurnResult]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def in_flight_for(self, user_id: str) -> int:
        return self._per_user.get(user_id, 0)

    def busy_conversations(self) -> set[str]:
        """Conversations with a turn (or a delete) running or waiting in this process."""
        return {conversation_id for _, conversation_id in self.lock.busy()}

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
        lease: Lease | None = None
        try:
            if request.conversation_id is not None:
                lease = await self.lock.acquire((user, request.conversation_id))
            clock = EngineClock()
            stream = self.engine.stream(request)
        except BaseException:
            if lease is not None:
                await lease.release()
            self._leave(user)
            raise
        task = asyncio.get_running_loop().create_task(self._finish(user, stream, lease, clock))
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return Turn(stream, task, clock)

    async def _finish(self, user: str, stream: TurnStream, lease: Lease | None, clock: EngineClock) -> TurnResult:
        """The turn's task: its result, then the conversation's lock and the user's slot are given back."""
        try:
            result = await stream.result()
            clock.finished = time.perf_counter()
            return result
        finally:
            try:
                if lease is not None:
                    await lease.release()
            finally:
                self._leave(user)

    @asynccontextmanager
    async def conversation(self, user_id: str, conversation_id: str) -> AsyncIterator[None]:
        """Hold a conversation's lock (e.g. to delete it after its in-flight turns)."""
        lease = await self.lock.acquire((user_id, conversation_id))
        try:
            yield
        finally:
            await lease.release()

    async def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for the turns in flight; returns how many are still running."""
        if not self._tasks:
            return 0
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return len(pending)

    def _finished(self, task: asyncio.Task[TurnResult]) -> None:
        self._tasks.discard(task)
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
