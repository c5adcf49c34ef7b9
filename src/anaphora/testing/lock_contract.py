"""The contract every :class:`~anaphora.store.protocols.TurnLock` must honour, as a pytest suite to subclass.

A backend's test module subclasses :class:`TurnLockContract` and provides a ``locks`` fixture yielding two locks
that must exclude each other: two instances over one shared backend standing in for two replicas, or the same
instance twice for a lock that only works within a process. The fixture closes them afterwards. Each test uses
keys of its own (a random conversation id), so a shared backend needs no cleaning between tests.

Every wait is bounded (``WAIT_S``); nothing asserts how fast a lock is, only what order things happen in.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from anaphora.store.protocols import LockKey, TurnLock

WAIT_S = 30.0


def fresh_key(user: str = "alice") -> LockKey:
    return (user, uuid.uuid4().hex[:12])


class TurnLockContract:
    @pytest.fixture
    def locks(self) -> tuple[TurnLock, TurnLock]:  # pragma: no cover - overridden
        raise NotImplementedError("a TurnLockContract subclass must provide a `locks` fixture (a pair of locks)")

    async def test_one_holder_at_a_time_across_both(self, locks) -> None:
        key, inside, most, order = fresh_key(), [0], [0], []

        async def turn(n: int) -> None:
            lease = await locks[n % 2].acquire(key)
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            order.append(n)
            await asyncio.sleep(0.01)
            inside[0] -= 1
            await lease.release()

        await asyncio.wait_for(asyncio.gather(*(turn(n) for n in range(8))), WAIT_S)
        assert most[0] == 1 and sorted(order) == list(range(8))

    async def test_waiters_of_one_lock_are_served_in_arrival_order(self, locks) -> None:
        lock, key, order = locks[0], fresh_key(), []
        first = await lock.acquire(key)

        async def turn(n: int) -> None:
            lease = await lock.acquire(key)
            order.append(n)
            await lease.release()

        waiters = []
        for n in range(5):
            waiters.append(asyncio.create_task(turn(n)))
            await asyncio.sleep(0.02)  # each is queued before the next arrives
        await first.release()
        await asyncio.wait_for(asyncio.gather(*waiters), WAIT_S)
        assert order == list(range(5))

    async def test_other_conversations_are_not_blocked(self, locks) -> None:
        held = await locks[0].acquire(fresh_key())
        try:
            other = await asyncio.wait_for(locks[1].acquire(fresh_key()), WAIT_S)
            same_conversation_other_user = await asyncio.wait_for(locks[1].acquire(fresh_key("bob")), WAIT_S)
            await other.release()
            await same_conversation_other_user.release()
        finally:
            await held.release()

    async def test_a_cancelled_waiter_leaves_nothing_held(self, locks) -> None:
        key = fresh_key()
        held = await locks[0].acquire(key)
        waiter = asyncio.create_task(locks[1].acquire(key))
        await asyncio.sleep(0.1)
        assert key in locks[1].busy() and not waiter.done()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await held.release()
        again = await asyncio.wait_for(locks[1].acquire(key), WAIT_S)
        await again.release()
        assert key not in locks[0].busy() and key not in locks[1].busy()

    async def test_busy_names_held_and_waiting_keys(self, locks) -> None:
        key = fresh_key()
        lease = await locks[0].acquire(key)
        assert key in locks[0].busy()
        await lease.release()
        await lease.release()  # a second release is harmless
        assert key not in locks[0].busy()
