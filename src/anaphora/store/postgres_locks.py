"""Turn locks across replicas as PostgreSQL advisory locks, used through :class:`~anaphora.store.locks.SharedTurnLock`.

A lock is ``pg_try_advisory_lock`` on a 64-bit hash of (user, conversation), taken on one connection that this
process keeps for its turn locks alone. PostgreSQL drops a session's advisory locks when its connection ends, so
the lease is the connection: a replica that dies frees its locks as soon as the server sees the connection close
(at once when the process is killed and the kernel closes its sockets). One connection holds all of the process's
locks (the process lock in front lets at most one turn per conversation ask), so however many conversations are
locked at once (erasing a user locks all of theirs) no pool can run dry, and the conversation store's own pool
stays free for the appends the turns are waiting to make. If that connection breaks, its locks are gone: renewals
report it, and the next lock opens a new connection.

Needs the ``postgres`` extra: ``pip install 'anaphora[postgres]'``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from anaphora.errors import StoreError, require
from anaphora.store.locks import lock_digest
from anaphora.store.protocols import LockKey


def lock_id(key: LockKey) -> int:
    """The advisory lock's bigint key."""
    return int.from_bytes(lock_digest(key), "big", signed=True)


class PostgresLockBackend:
    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        self._psycopg = require("psycopg", package="psycopg[binary]", extra="postgres", purpose="PostgreSQL turn locks")
        self._url = url
        self.timeout_s = timeout_s
        self._conn: Any = None
        self._connecting = asyncio.Lock()

    async def _connection(self) -> Any:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        async with self._connecting:
            if self._conn is None or self._conn.closed:
                try:
                    self._conn = await self._psycopg.AsyncConnection.connect(
                        self._url, autocommit=True, connect_timeout=max(1, round(self.timeout_s))
                    )
                except (self._psycopg.Error, OSError) as exc:
                    raise StoreError(
                        f"cannot take a turn lock in PostgreSQL: {exc}",
                        hint="check ANAPHORA_POSTGRES_URL and that the server is running and reachable",
                    ) from exc
            return self._conn

    async def try_acquire(self, key: LockKey) -> object | None:
        """The token is the connection the lock lives on."""
        conn = await self._connection()
        try:
            row = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_id(key),))).fetchone()
        except self._psycopg.Error as exc:
            raise StoreError(
                f"cannot take a turn lock in PostgreSQL: {exc}", hint="check that the PostgreSQL server is running"
            ) from exc
        return conn if row[0] else None

    async def renew(self, key: LockKey, token: object) -> bool:
        """The lock lasts as long as its connection: check that it is still the open one."""
        conn: Any = token
        if conn is not self._conn or conn.closed:
            return False
        try:
            await conn.execute("SELECT 1")
        except self._psycopg.Error:
            return False
        return True

    async def release(self, key: LockKey, token: object) -> None:
        conn: Any = token
        if conn.closed:
            return  # its locks went with it
        await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id(key),))

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
