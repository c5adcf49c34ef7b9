"""One migration runner's rules, shared by the SQLite database and both PostgreSQL stores (in the style of llm's
``_llm_migrations``): named steps, in definition order, each recorded by name once it has run; a database that
records a step this code does not know was written by a newer Anaphora and is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar, overload

from anaphora.errors import StoreError

Step = TypeVar("Step", bound=Callable)


class Migrations(Sequence[tuple[str, Step]], Generic[Step]):
    """The ordered, named schema steps of one database; use an instance as the decorator that registers one."""

    def __init__(self, what: str, hint: str) -> None:
        """``what`` names the database in errors ("the SQLite store at ..."); ``hint`` says how to get past a
        database written by a newer Anaphora."""
        self.what = what
        self.hint = hint
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
        unknown = sorted(done - set(self.names))
        if unknown:
            raise StoreError(
                f"{self.what}{where} was written by a newer Anaphora (schema step {unknown[-1]!r})", hint=self.hint
            )
        return [(name, step) for name, step in self._steps if name not in done]
