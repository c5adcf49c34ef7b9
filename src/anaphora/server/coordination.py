"""What replicas must agree on, chosen from the settings: where sessions live and what orders a conversation's turns.

One replica needs neither shared: sessions in memory and a process lock. Several replicas behind a load balancer
share sessions in Redis (``session_store = "redis"``) and a cross-replica turn lock (``turn_lock``; ``"auto"``
takes the one of the shared conversation store, so PostgreSQL history is ordered by PostgreSQL advisory locks and
Redis history by Redis leases, and no extra server is needed for the lock).
"""

from __future__ import annotations

from collections.abc import Callable

from anaphora.app import server_url
from anaphora.server.sessions import MemorySessionStore
from anaphora.settings import Settings
from anaphora.store.locks import ProcessTurnLock, SharedTurnLock
from anaphora.store.protocols import SessionStore, TurnLock

AUTO_TURN_LOCK = {"sqlite": "process", "postgres": "postgres", "redis": "redis"}


def turn_lock_kind(settings: Settings) -> str:
    """The ``turn_lock`` setting with ``auto`` resolved: ``process``, ``redis`` or ``postgres``."""
    if settings.server.turn_lock == "auto":
        return AUTO_TURN_LOCK[settings.stores.conversation_store]
    return settings.server.turn_lock


def build_turn_lock(settings: Settings) -> TurnLock:
    kind = turn_lock_kind(settings)
    if kind == "process":
        return ProcessTurnLock()
    if kind == "redis":
        from anaphora.store.redis_coordination import RedisLockBackend

        lease_s = settings.server.turn_lock_lease_s
        backend = RedisLockBackend(
            server_url(settings.stores, "turn_lock", "redis", "process"),
            lease_s=lease_s,
            key_prefix=settings.stores.redis_key_prefix,
        )
        return SharedTurnLock(backend, renew_every_s=lease_s / 3, wait_s=settings.server.turn_lock_wait_s)
    from anaphora.store.postgres_locks import PostgresLockBackend

    backend = PostgresLockBackend(server_url(settings.stores, "turn_lock", "postgres", "process"))
    # the lease is the connection; renewing only checks it is alive, so a few seconds apart is plenty
    return SharedTurnLock(backend, renew_every_s=10.0, wait_s=settings.server.turn_lock_wait_s)


def build_session_store(settings: Settings, *, busy: Callable[[str], bool]) -> SessionStore:
    """``busy(user_id)`` tells the in-memory store which sessions have turns in flight (never expired or evicted)."""
    if settings.server.session_store == "redis":
        from anaphora.store.redis_coordination import RedisSessionStore

        return RedisSessionStore(
            server_url(settings.stores, "session_store", "redis", "memory"),
            ttl_s=settings.server.session_ttl_s,
            key_prefix=settings.stores.redis_key_prefix,
        )
    server = settings.server
    return MemorySessionStore(ttl_s=server.session_ttl_s, max_live=server.max_live_sessions, busy=busy)
