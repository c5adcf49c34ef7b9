"""Sessions and turn locks in one process (the contract suites), the shared lock's polling, renewal and clean-up
over an in-memory lease backend, and how settings choose the backends."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

import pytest

from anaphora.errors import ConfigurationError, RateLimitError
from anaphora.server.coordination import build_session_store, build_turn_lock, turn_lock_kind
from anaphora.server.sessions import MemorySessionStore
from anaphora.settings import Settings
from anaphora.store.locks import ProcessTurnLock, SharedTurnLock
from anaphora.store.protocols import LockKey
from anaphora.testing.lock_contract import TurnLockContract, fresh_key
from anaphora.testing.session_contract import SessionStoreContract
from tests.unit.server.test_sessions import Clock

pytestmark = pytest.mark.unit


class TestMemorySessionStore(SessionStoreContract):
    @pytest.fixture
    def make_sessions(self) -> Iterator[object]:
        def make(ttl_s: float) -> MemorySessionStore:
            return MemorySessionStore(ttl_s=ttl_s, max_live=100, clock=Clock())

        yield make

    async def idle(self, store: MemorySessionStore, seconds: float) -> None:
        store.clock.now += seconds  # type: ignore[attr-defined]


class TestProcessTurnLock(TurnLockContract):
    @pytest.fixture
    def locks(self) -> tuple[ProcessTurnLock, ProcessTurnLock]:
        lock = ProcessTurnLock()
        return lock, lock  # one process: the same lock serves every request


class LeaseBackend:
    """Leases in a dict, expiring on the event loop's clock: what Redis does, for testing SharedTurnLock alone."""

    def __init__(self, lease_s: float = 5.0, grant_delay_s: float = 0.0) -> None:
        self.lease_s = lease_s
        self.grant_delay_s = grant_delay_s
        self.leases: dict[LockKey, tuple[str, float]] = {}
        self.renewals = 0
        self.closed = False

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def holder(self, key: LockKey) -> str | None:
        token, until = self.leases.get(key, (None, 0.0))
        return token if until > self._now() else None

    async def try_acquire(self, key: LockKey) -> object | None:
        await asyncio.sleep(self.grant_delay_s)
        if self.holder(key) is not None:
            return None
        token = uuid.uuid4().hex
        self.leases[key] = (token, self._now() + self.lease_s)
        return token

    async def renew(self, key: LockKey, token: object) -> bool:
        self.renewals += 1
        if self.holder(key) != token:
            return False
        self.leases[key] = (token, self._now() + self.lease_s)
        return True

    async def release(self, key: LockKey, token: object) -> None:
        if self.holder(key) == token:
            del self.leases[key]

    async def aclose(self) -> None:
        self.closed = True


class TestSharedTurnLockOverLeases(TurnLockContract):
    @pytest.fixture
    async def locks(self):
        backend = LeaseBackend()
        pair = tuple(SharedTurnLock(backend, renew_every_s=1.0, wait_s=30.0) for _ in range(2))
        yield pair
        for lock in pair:
            await lock.aclose()
        assert backend.closed and not any(backend.holder(k) for k in backend.leases)


async def test_a_lease_is_renewed_while_held_and_outlives_its_first_term() -> None:
    backend = LeaseBackend(lease_s=0.3)
    holder, other = (SharedTurnLock(backend, renew_every_s=0.05, wait_s=30.0) for _ in range(2))
    key = fresh_key()
    lease = await holder.acquire(key)
    waiter = asyncio.create_task(other.acquire(key))
    await asyncio.sleep(1.0)  # three lease terms
    assert backend.renewals >= 3 and not waiter.done()
    await lease.release()
    await (await asyncio.wait_for(waiter, 30)).release()


async def test_a_dead_holders_lease_runs_out_and_frees_the_conversation() -> None:
    backend = LeaseBackend(lease_s=0.5)
    key = fresh_key()
    assert await backend.try_acquire(key) is not None  # a replica took it, then died: nobody renews it
    lock = SharedTurnLock(backend, renew_every_s=0.1, wait_s=30.0)
    lease = await asyncio.wait_for(lock.acquire(key), 30)
    await lease.release()


async def test_waiting_longer_than_turn_lock_wait_s_is_refused() -> None:
    backend = LeaseBackend(lease_s=60)
    holder, other = (SharedTurnLock(backend, renew_every_s=1.0, wait_s=0.3) for _ in range(2))
    key = fresh_key()
    lease = await holder.acquire(key)
    with pytest.raises(RateLimitError, match="another replica"):
        await asyncio.wait_for(other.acquire(key), 30)
    assert key not in other.busy()  # the refused waiter gave up its place in the process queue
    await lease.release()


async def test_a_lost_lease_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    backend = LeaseBackend(lease_s=60)
    lock = SharedTurnLock(backend, renew_every_s=0.05, wait_s=30.0)
    key = fresh_key()
    lease = await lock.acquire(key)
    backend.leases.clear()  # as if the lease ran out while the replica was frozen
    with caplog.at_level(logging.ERROR, logger="anaphora.locks"):
        await asyncio.sleep(0.3)
    assert "lost the turn lock" in caplog.text
    await lease.release()


async def test_a_grant_that_arrives_after_the_waiter_left_is_given_back() -> None:
    backend = LeaseBackend(grant_delay_s=0.2)
    lock = SharedTurnLock(backend, renew_every_s=1.0, wait_s=30.0)
    key = fresh_key()
    waiter = asyncio.create_task(lock.acquire(key))
    await asyncio.sleep(0.05)  # the first try is on its way
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await lock.aclose()  # waits for the clean-up
    assert backend.holder(key) is None


def _settings(tmp_path, **values) -> Settings:
    return Settings(data_dir=tmp_path, **values)


@pytest.mark.parametrize(
    ("store", "lock", "kind"),
    [
        ("sqlite", "auto", "process"),
        ("postgres", "auto", "postgres"),
        ("redis", "auto", "redis"),
        ("postgres", "redis", "redis"),
        ("redis", "process", "process"),
    ],
)
def test_auto_turn_lock_follows_the_conversation_store(tmp_path, store: str, lock: str, kind: str) -> None:
    settings = _settings(tmp_path, conversation_store=store, turn_lock=lock, postgres_url="postgresql://x@h/db")
    assert turn_lock_kind(settings) == kind


async def test_settings_build_the_backends(tmp_path) -> None:
    from anaphora.store.postgres_locks import PostgresLockBackend
    from anaphora.store.redis_coordination import RedisLockBackend, RedisSessionStore

    assert isinstance(build_turn_lock(_settings(tmp_path)), ProcessTurnLock)
    shared = build_turn_lock(_settings(tmp_path, turn_lock="redis", turn_lock_lease_s=9))
    assert isinstance(shared, SharedTurnLock) and isinstance(shared.backend, RedisLockBackend)
    assert shared.backend.lease_ms == 9000 and shared.renew_every_s == 3
    await shared.aclose()
    pg = build_turn_lock(_settings(tmp_path, turn_lock="postgres", postgres_url="postgresql://x@h/db"))
    assert isinstance(pg, SharedTurnLock) and isinstance(pg.backend, PostgresLockBackend)
    memory = build_session_store(_settings(tmp_path, max_live_sessions=7), busy=lambda user: False)
    assert isinstance(memory, MemorySessionStore) and memory.max_live == 7
    redis_sessions = build_session_store(_settings(tmp_path, session_store="redis", session_ttl_s=5), busy=bool)
    assert isinstance(redis_sessions, RedisSessionStore) and redis_sessions.ttl_s == 5
    await redis_sessions.aclose()


def test_a_shared_backend_without_its_url_is_a_configuration_error(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="turn_lock is 'postgres' but no postgres_url") as caught:
        build_turn_lock(_settings(tmp_path, turn_lock="postgres"))
    assert "turn_lock='process'" in (caught.value.hint or "")
    with pytest.raises(ConfigurationError, match="session_store is 'redis' but no redis_url"):
        build_session_store(_settings(tmp_path, session_store="redis", redis_url=""), busy=bool)
