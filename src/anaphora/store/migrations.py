"""One migration runner, shared by the SQLite database and the three PostgreSQL stores (in the style of llm's
``_llm_migrations``): named steps, in definition order, each recorded by name in the database's :class:`Ledger` once
it has run; a database that records a step this code does not know was written by a newer Anaphora and is refused.
(The Redis store keeps no schema: what it reads from older records it derives when it reads them.)"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

from anaphora.errors import StoreError

Step = TypeVar("Step", bound=Callable)


class Migrations(Sequence[tuple[str, Step]], Generic[Step]):
    """The ordered, named schema steps of one database; use an instance as the decorator that registers one."""

    def __init__(self, what: str, hint: str, moved: Iterable[str] = ()) -> None:
        """``what`` names the database in errors ("the SQLite store at ..."); ``hint`` says how to get past a
        database written by a newer Anaphora; ``moved``: steps this ledger may record that another owner of tables
        in the same database runs now (known, never run here)."""
        self.what = what
        self.hint = hint
        self.moved = frozenset(moved)
        self._steps: list[tuple[str, Step]] = []

    def __call__(self, step: Step) -> Step:
        self._steps.append((step.__name__, step))
        return step

    @overload
    def __getitem__(self, index: int) -> tuple[str, Step]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, Step]]: ...

    def __getitem__(self, index):
        return self._steps[index]

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[tuple[str, Step]]:
        return iter(self._steps)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._steps]

    def pending(self, applied: Iterable[str], where: str = "") -> list[tuple[str, Step]]:
        """The steps not yet applied, in order; refuses a database that has steps this code does not know."""
        done = set(applied)
        unknown = sorted(done - set(self.names) - self.moved)
        if unknown:
            raise StoreError(
                f"{self.what}{where} was written by a newer Anaphora (schema step {unknown[-1]!r})", hint=self.hint
            )
        return [(name, step) for name, step in self._steps if name not in done]


class Ledger(Protocol):
    """Where one database records the steps it has run, inside the caller's transaction."""

    async def applied(self) -> list[str]:
        """The names of the steps already run, in order (creating the record first if it has none)."""
        ...

    async def apply(self, name: str, step: Callable, number: int) -> None:
        """Run ``step`` and record it as the ``number``-th, under ``name``."""
        ...


async def migrate(migrations: Migrations, ledger: Ledger, where: str = "") -> list[str]:
    """The one migration runner: run the steps ``ledger`` has not recorded, in order; the names applied after."""
    applied = await ledger.applied()
    for number, (name, step) in enumerate(migrations.pending(applied, where), start=len(applied) + 1):
        await ledger.apply(name, step, number)
        applied.append(name)
    return applied


def migrate_now(migrations: Migrations, ledger: Ledger, where: str = "") -> list[str]:
    """:func:`migrate` over a ledger on a synchronous connection (SQLite, the passage store's pool): its awaits
    never suspend, so the coroutine runs to its end right here, with no event loop (one may be running already)."""
    coroutine = migrate(migrations, ledger, where)
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("a synchronous migration ledger suspended; use `await migrate(...)` for an async one")


async def settled(value: Any) -> Any:
    """``value``, awaited when a driver's method returned an awaitable (psycopg's async connection) rather than the
    result (its sync one): so one ledger serves both."""
    return await value if inspect.isawaitable(value) else value


class PostgresLedger:
    """The steps a PostgreSQL database has run, as rows ``(version, name, applied_at)`` of ``table``, on a sync or an
    async psycopg connection; ``run_step`` runs one step (and may return an awaitable). The caller holds the
    transaction and the advisory lock under which replicas starting together migrate one at a time."""

    def __init__(self, conn: Any, table: str, run_step: Callable[[Callable], Any]) -> None:
        self.conn = conn
        self.table = table
        self.run_step = run_step

    async def applied(self) -> list[str]:
        await settled(
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        )
        cursor = await settled(self.conn.execute(f"SELECT name FROM {self.table} ORDER BY version"))
        rows = await settled(cursor.fetchall())
        return [row["name"] if isinstance(row, dict) else row[0] for row in rows]

    async def apply(self, name: str, step: Callable, number: int) -> None:
        await settled(self.run_step(step))
        await settled(self.conn.execute(f"INSERT INTO {self.table} (version, name) VALUES (%s, %s)", (number, name)))
