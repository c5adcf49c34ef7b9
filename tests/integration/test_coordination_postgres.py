"""Turn locks as PostgreSQL advisory locks: the lock contract suite, and that a replica's locks die with its
connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from anaphora.store.locks import SharedTurnLock
from anaphora.testing.lock_contract import TurnLockContract, fresh_key

pytestmark = pytest.mark.integration

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from anaphora.store.postgres_locks import PostgresLockBackend, lock_id  # noqa: E402


def _lock(url: str, wait_s: float = 60.0) -> SharedTurnLock:
    return SharedTurnLock(PostgresLockBackend(url), renew_every_s=1.0, wait_s=wait_s)


class TestPostgresTurnLock(TurnLockContract):
    @pytest.fixture
    async def locks(self, postgres_url: str) -> AsyncIterator[tuple[SharedTurnLock, SharedTurnLock]]:
        pair = (_lock(postgres_url), _lock(postgres_url))  # two replicas, a connection each
        yield pair
        for lock in pair:
            await lock.aclose()


async def test_a_dead_replicas_locks_go_with_its_connection(postgres_url: str) -> None:
    key = fresh_key()
    dead = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    await dead.execute("SELECT pg_advisory_lock(%s)", (lock_id(key),))
    survivor = _lock(postgres_url)
    try:
        waiter = asyncio.create_task(survivor.acquire(key))
        await asyncio.sleep(0.3)
        assert not waiter.done()
        await dead.close()  # what the kernel does for a killed process
        lease = await asyncio.wait_for(waiter, 30)
        await lease.release()
    finally:
        await survivor.aclose()


async def test_many_locks_at_once_need_one_connection(postgres_url: str) -> None:
    """Erasing a user locks all their conversations at once; that must not take a connection each."""
    lock = _lock(postgres_url)
    try:
        leases = [await asyncio.wait_for(lock.acquire(fresh_key()), 30) for _ in range(60)]
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            row = await (
                await conn.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory'")
            ).fetchone()
        assert row[0] == 1
        for lease in leases:
            await lease.release()
    finally:
        await lock.aclose()
