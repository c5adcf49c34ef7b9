"""Sessions and turn locks in Redis: the session and lock contract suites, and the Redis-only rules (one key per
session whose TTL is the inactivity TTL, re-armed on touch; lock leases that expire when their holder dies)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from anaphora.errors import StoreError
from anaphora.store.locks import SharedTurnLock
from anaphora.testing.lock_contract import TurnLockContract, fresh_key
from anaphora.testing.session_contract import SessionStoreContract

pytestmark = pytest.mark.integration

pytest.importorskip("redis", reason="the redis extra is not installed")

from anaphora.store.redis_coordination import RedisLockBackend, RedisSessionStore  # noqa: E402
from tests.integration.conftest import REDIS_URL, own_keys  # noqa: E402


class TestRedisSessionStore(SessionStoreContract):
    @pytest.fixture
    async def make_sessions(self, prefix: str) -> AsyncIterator[object]:
        made: list[RedisSessionStore] = []

        def make(ttl_s: float) -> RedisSessionStore:
            made.append(RedisSessionStore(REDIS_URL, ttl_s=ttl_s, key_prefix=prefix))
            return made[-1]

        yield make
        for store in made:
            await store.aclose()

    async def idle(self, store: RedisSessionStore, seconds: float) -> None:
        await asyncio.sleep(seconds)  # Redis's own clock expires the key


def _lock(prefix: str, lease_s: float = 10.0, wait_s: float = 60.0) -> SharedTurnLock:
    backend = RedisLockBackend(REDIS_URL, lease_s=lease_s, key_prefix=prefix)
    return SharedTurnLock(backend, renew_every_s=lease_s / 3, wait_s=wait_s)


class TestRedisTurnLock(TurnLockContract):
    @pytest.fixture
    async def locks(self, prefix: str) -> AsyncIterator[tuple[SharedTurnLock, SharedTurnLock]]:
        pair = (_lock(prefix), _lock(prefix))  # two replicas
        yield pair
        for lock in pair:
            await lock.aclose()


async def test_one_session_key_per_user_with_the_session_ttl(prefix: str, sync_redis) -> None:
    replicas = [RedisSessionStore(REDIS_URL, ttl_s=100, key_prefix=prefix) for _ in range(2)]
    try:
        first = await replicas[0].touch("alice")
        key = f"{prefix}session:alice"
        assert own_keys(sync_redis, prefix) == [key.encode()]
        assert 90_000 < sync_redis.pttl(key) <= 100_000
        sync_redis.pexpire(key, 5_000)  # as if time had passed
        seen = await replicas[1].touch("alice")  # the other replica sees the same session, and re-arms the TTL
        assert (seen.id, seen.started_at) == (first.id, first.started_at)
        assert sync_redis.pttl(key) > 90_000
        assert (await replicas[1].logout("alice")).id == first.id
        assert own_keys(sync_redis, prefix) == []
        together = await asyncio.gather(*(replicas[n % 2].touch("bob") for n in range(10)))
        assert len({s.id for s in together}) == 1
    finally:
        for store in replicas:
            await store.aclose()


async def test_a_dead_replicas_lock_is_free_after_its_lease(prefix: str, sync_redis) -> None:
    key = fresh_key()
    dead = RedisLockBackend(REDIS_URL, lease_s=1.0, key_prefix=prefix)
    assert await dead.try_acquire(key) is not None  # taken, then never renewed nor released
    await dead.aclose()
    survivor = _lock(prefix)
    try:
        lease = await asyncio.wait_for(survivor.acquire(key), 30)
        await lease.release()
        assert not own_keys(sync_redis, f"{prefix}lock:")
    finally:
        await survivor.aclose()


async def test_a_holder_whose_lease_ran_out_cannot_free_the_next_holders_lock(prefix: str) -> None:
    backend = RedisLockBackend(REDIS_URL, lease_s=0.2, key_prefix=prefix)
    key = fresh_key()
    try:
        stale = await backend.try_acquire(key)
        await asyncio.sleep(0.5)
        current = await backend.try_acquire(key)
        assert current is not None
        assert not await backend.renew(key, stale)
        await backend.release(key, stale)  # compare-and-delete: the current holder keeps it
        assert await backend.try_acquire(key) is None
        await backend.release(key, current)
        assert await backend.try_acquire(key) is not None
    finally:
        await backend.aclose()


async def test_unreachable_redis_is_a_store_error() -> None:
    sessions = RedisSessionStore("redis://127.0.0.1:1/0", ttl_s=10, timeout_s=2)
    lock = RedisLockBackend("redis://127.0.0.1:1/0", lease_s=10, timeout_s=2)
    try:
        with pytest.raises(StoreError, match="cannot reach"):
            await sessions.touch("alice")
        with pytest.raises(StoreError, match="cannot reach"):
            await lock.try_acquire(fresh_key())
    finally:
        await sessions.aclose()
        await lock.aclose()
