"""The TTLs of what the service keeps: background tasks that delete what has outlived its time.

- :class:`HistorySweeper` (``history_ttl_s``): each conversation whose last activity is older than the TTL, with its
  turns and summaries, in one transaction. A conversation with a turn in flight is spared until the next sweep.
- :class:`MemorySweeper` (``memory_ttl_days``): every long-term memory item (with its vector) from a turn older
  than the TTL, and entities not mentioned since, for all users (:meth:`MemoryStore.delete_expired`).

Each runs every ``history_sweep_interval_s`` from the app's lifespan (a first sweep right at startup) and logs what
it deleted; a sweep that fails is logged and tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from anaphora.memory.protocols import MemoryStore
from anaphora.server.turns import TurnRunner
from anaphora.store.protocols import ConversationStore

log = logging.getLogger("anaphora.server")


class Sweeper(ABC):
    """Runs :meth:`sweep` every ``interval_s`` between :meth:`start` and :meth:`stop`; ``deleted`` adds up what
    every sweep removed, by kind."""

    what = "TTL"  # named in the log

    def __init__(self, *, ttl_s: float, interval_s: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self.interval_s = interval_s
        self.clock = clock
        self.deleted: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    async def _delete(self, before_ts: float) -> dict[str, int]:
        """Delete what is older than ``before_ts``; the counts by kind."""

    async def sweep(self) -> dict[str, int]:
        """Delete what is older than the TTL now; returns what went."""
        counts = await self._delete(self.clock() - self.ttl_s)
        for name, count in counts.items():
            self.deleted[name] = self.deleted.get(name, 0) + count
        if any(counts.values()):
            done = ", ".join(f"{count} {name}" for name, count in counts.items())
            log.info("%s: deleted %s older than %.0f s", self.what, done, self.ttl_s)
        return counts

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # a failed sweep is retried at the next interval
                log.error("%s sweep failed", self.what, exc_info=exc)
            await asyncio.sleep(self.interval_s)

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class HistorySweeper(Sweeper):
    what = "history TTL"

    def __init__(self, store: ConversationStore, runner: TurnRunner, **timing) -> None:
        super().__init__(**timing)
        self.store = store
        self.runner = runner
        self.deleted = {"conversations": 0, "turns": 0, "summaries": 0}

    async def _delete(self, before_ts: float) -> dict[str, int]:
        return await self.store.delete_inactive(before_ts, keep=self.runner.busy_conversations())


class MemorySweeper(Sweeper):
    what = "memory TTL"

    def __init__(self, memory: MemoryStore, **timing) -> None:
        super().__init__(**timing)
        self.memory = memory
        self.deleted = {"memories": 0, "vectors": 0, "entities": 0, "profiles": 0}

    async def _delete(self, before_ts: float) -> dict[str, int]:
        return await self.memory.delete_expired(before_ts)
