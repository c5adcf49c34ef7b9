"""What the async PostgreSQL stores share: a psycopg 3 connection pool that opens on first use (or ``open``) and
brings the store's schema up to date first, one replica at a time.

A store subclasses :class:`AsyncPostgresStore` and names its migrations (``MIGRATIONS``, run in order), the table
that records them and the advisory-lock key under which replicas starting together migrate one at a time. Steps
run inside one transaction with the lock held; a database that records a step this code does not know is refused
(:class:`~anaphora.store.migrations.Migrations`). Needs the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from anaphora.errors import StoreError, require
from anaphora.store.migrations import Migrations, PostgresLedger, migrate

Migration = Callable[..., Awaitable[None]]
URL_HINT = "set ANAPHORA_POSTGRES_URL, e.g. postgresql://user:password@host:5432/anaphora"


async def run_script(conn: Any, script: str) -> None:
    """Execute ``;``-separated statements on ``conn``, in the caller's transaction."""
    for statement in script.split(";"):
        if statement.strip():
            await conn.execute(statement)


VECTOR_EXTENSION = "vector"  # pgvector's extension name


def connection_error(purpose: str, exc: Exception) -> StoreError:
    return StoreError(
        f"cannot connect to {purpose}: {exc}",
        hint="check ANAPHORA_POSTGRES_URL and that the server is running and reachable",
    )


def vector_extension_error(exc: Exception) -> StoreError:
    return StoreError(
        f"the pgvector extension is not enabled in this database and cannot be created: {exc}",
        hint="install pgvector on the server and run `CREATE EXTENSION vector;` in the database as its owner or a "
        "superuser (see docs/deployment.md)",
    )


async def create_vector_extension(conn: Any) -> None:
    """Enable pgvector in the database unless it is; a :class:`StoreError` that says how when it cannot be."""
    import psycopg
    from psycopg import sql

    if await (await conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (VECTOR_EXTENSION,))).fetchone():
        return
    try:
        async with conn.transaction():  # a savepoint, so the error below is ours rather than an aborted transaction
            await conn.execute(sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(VECTOR_EXTENSION)))
    except psycopg.Error as exc:
        raise vector_extension_error(exc) from exc


class AsyncPostgresStore:
    """An async pool (rows as dicts) that connects and migrates on :meth:`open` or first use; close with
    :meth:`aclose`. Construction is cheap and synchronous."""

    PURPOSE: ClassVar[str]  # "the PostgreSQL conversation store": named in errors
    MIGRATIONS: ClassVar[Migrations[Migration]]
    MIGRATIONS_TABLE: ClassVar[str]
    MIGRATION_LOCK: ClassVar[int]  # pg_advisory_xact_lock key

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10, timeout_s: float = 30.0) -> None:
        require("psycopg", package="psycopg[binary]", extra="postgres", purpose=self.PURPOSE)
        pool_module = require("psycopg_pool", package="psycopg-pool", extra="postgres", purpose=self.PURPOSE)
        from psycopg.rows import dict_row

        if not url:
            raise StoreError(f"{self.PURPOSE} needs a connection URL", hint=URL_HINT)
        self.timeout_s = timeout_s
        self.pool = pool_module.AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            open=False,
            kwargs={"row_factory": dict_row},
        )
        self._opened = False
        self._open_lock: asyncio.Lock | None = None

    async def open(self) -> None:
        """Open the connection pool and bring the schema up to date; safe to call more than once."""
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._opened:
                return
            import psycopg
            import psycopg_pool

            try:
                await self.pool.open(wait=True, timeout=self.timeout_s)
            except (psycopg.Error, psycopg_pool.PoolTimeout, OSError) as exc:
                await self.pool.close()
                raise connection_error(self.PURPOSE, exc) from exc
            try:
                await self._migrate()
            except BaseException:
                await self.pool.close()
                raise
            self._opened = True

    async def _migrate(self) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.MIGRATION_LOCK,))
            ledger = PostgresLedger(conn, self.MIGRATIONS_TABLE, lambda step: self._apply(step, conn))
            await migrate(self.MIGRATIONS, ledger)

    async def _apply(self, step: Migration, conn: Any) -> None:
        """Run one migration step (a store whose steps need more than the connection passes it here)."""
        await step(conn)

    async def ping(self) -> None:
        """Raise unless the database answers (readiness checks)."""
        async with await self._conn() as conn:
            await conn.execute("SELECT 1")

    async def aclose(self) -> None:
        await self.pool.close()
        self._opened = False

    async def _conn(self):
        await self.open()
        return self.pool.connection()
