"""Turn locks (:class:`~anaphora.store.protocols.TurnLock`): one conversation's turns run one at a time.

- :class:`ProcessTurnLock` orders the turns of one process: one FIFO ``asyncio.Lock`` per conversation. It is all a
  single replica needs.
- :class:`SharedTurnLock` orders them across the replicas that share a store. A :class:`LockBackend` (Redis
  ``SET NX PX`` in :mod:`anaphora.store.redis_coordination`, PostgreSQL advisory locks in
  :mod:`anaphora.store.postgres_locks`) grants the lock to one process at a time; a process lock in front of it
  keeps arrival order inside the process and means only the first waiter of a process polls the backend. The lease
  is renewed while the turn runs, so a live holder keeps it however long its turn takes, and a dead one loses it
  after at most one lease (Redis) or as soon as its connection drops (PostgreSQL).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
from functools import partial
from typing import Protocol

from anaphora.errors import RateLimitError
from anaphora.store.protocols import Lease, LockKey

log = logging.getLogger("anaphora.locks")


def lock_digest(key: LockKey) -> bytes:
    """A fixed-size name for (user, conversation): ids may contain any character, so they are hashed, not joined."""
    user_id, conversation_id = key
    return hashlib.blake2b(f"{user_id}\x00{conversation_id}".encode(), digest_size=8).digest()


class _ProcessLease:
    def __init__(self, owner: ProcessTurnLock, key: LockKey) -> None:
        self._owner, self._key, self._released = owner, key, False

    async def release(self) -> None:
        if not self._released:
            self._released = True
            self._owner._release(self._key)


class ProcessTurnLock:
    """One FIFO lock per key in this process, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._entries: dict[LockKey, tuple[asyncio.Lock, list[int]]] = {}

    async def acquire(self, key: LockKey) -> Lease:
        lock, users = self._entries.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise
        return _ProcessLease(self, key)

    def _release(self, key: LockKey) -> None:
        self._entries[key][0].release()
        self._forget(key)

    def _forget(self, key: LockKey) -> None:
        _, users = self._entries[key]
        users[0] -= 1
        if users[0] == 0:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def busy(self) -> set[LockKey]:
        return set(self._entries)

    async def aclose(self) -> None:
        return None


class LockBackend(Protocol):
    """What :class:`SharedTurnLock` needs from a shared store. A token stands for one holding of one key.

    ``try_acquire`` never waits for the key: it returns a token, or ``None`` when another holder has it.
    ``renew`` extends the holding (``False``: it was lost, e.g. its lease ran out); ``release`` frees it, and frees
    nothing when the holding was lost and someone else has the key now.
    """

    async def try_acquire(self, key: LockKey) -> object | None: ...

    async def renew(self, key: LockKey, token: object) -> bool: ...

    async def release(self, key: LockKey, token: object) -> None: ...

    async def aclose(self) -> None: ...


class _SharedLease:
    def __init__(self, owner: SharedTurnLock, key: LockKey, token: object, local: Lease) -> None:
        self._owner, self._key, self._token, self._local = owner, key, token, local
        self._released = False
        self._stop = asyncio.Event()
        self._renewal = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        """Renew every ``renew_every_s`` until released; never interrupted mid-call (a backend's connection must
        not be left half-way through a command)."""
        backend = self._owner.backend
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), self._owner.renew_every_s)
                return
            except TimeoutError:
                pass
            try:
                if not await backend.renew(self._key, self._token):
                    log.error(
                        "lost the turn lock of a conversation (its lease ran out before it could be renewed): another "
                        "replica may run a turn of it at the same time"
                    )
                    return
            except Exception as exc:  # the store is briefly unreachable: try again at the next renewal
                log.warning("could not renew a turn lock: %s", exc)

    async def _release_remote(self) -> None:
        await self._renewal
        try:
            await self._owner.backend.release(self._key, self._token)
        except Exception as exc:
            log.warning("could not release a turn lock (it frees itself when its lease runs out): %s", exc)

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._stop.set()
        try:  # shielded: a caller cancelled now must not leave the key held until its lease runs out
            await asyncio.shield(self._release_remote())
        finally:
            await self._local.release()


class SharedTurnLock:
    """A :class:`LockBackend` shared by replicas, behind a :class:`ProcessTurnLock` for order within the process.

    ``renew_every_s`` should be well under the backend's lease. A turn that cannot get the lock within ``wait_s``
    (another replica's turn of the conversation runs that long) is refused with :class:`RateLimitError`.
    """

    def __init__(
        self,
        backend: LockBackend,
        *,
        renew_every_s: float,
        wait_s: float,
        poll_s: tuple[float, float] = (0.005, 0.25),
    ) -> None:
        self.backend = backend
        self.renew_every_s = renew_every_s
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.local = ProcessTurnLock()
        self._cleanups: set[asyncio.Task[None]] = set()

    def busy(self) -> set[LockKey]:
        return self.local.busy()

    async def acquire(self, key: LockKey) -> Lease:
        local = await self.local.acquire(key)
        try:
            token = await self._wait(key)
        except BaseException:
            await local.release()
            raise
        return _SharedLease(self, key, token, local)

    async def _wait(self, key: LockKey) -> object:
        """Poll with exponential backoff and jitter, so waiting replicas neither hammer the store nor sleep long."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        pause, longest = self.poll_s
        while True:
            token = await self._attempt(key)
            if token is not None:
                return token
            if loop.time() >= deadline:
                raise RateLimitError(
                    f"the conversation has had a turn running on another replica for over {self.wait_s:.0f} s",
                    hint="retry when that turn has finished (the turn_lock_wait_s setting bounds this wait)",
                    retry_after_s=max(1.0, longest),
                )
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, longest)

    async def _attempt(self, key: LockKey) -> object | None:
        """One try; if the caller is cancelled meanwhile, a lock granted after all is released, not leaked."""
        attempt = asyncio.ensure_future(self.backend.try_acquire(key))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(partial(self._release_orphan, key))
            raise

    def _release_orphan(self, key: LockKey, attempt: asyncio.Future[object | None]) -> None:
        if attempt.cancelled() or attempt.exception() is not None or attempt.result() is None:
            return
        task = asyncio.get_running_loop().create_task(self.backend.release(key, attempt.result()))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def aclose(self) -> None:
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        await self.backend.aclose()
