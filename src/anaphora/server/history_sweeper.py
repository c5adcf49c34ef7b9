"""The history TTL: a background task that deletes conversations inactive for longer than ``history_ttl_s``.

It runs every ``history_sweep_interval_s`` from the app's lifespan (a first sweep right at startup), deleting in
one transaction each conversation whose last activity is older than the TTL, with its turns and summaries. A
conversation with a turn in flight is spared until the next sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from anaphora.server.turns import TurnRunner
from anaphora.store import SQLiteConversationStore

log = logging.getLogger("anaphora.server")


class HistorySweeper:
    def __init__(
        self,
        store: SQLiteConversationStore,
        runner: TurnRunner,
        *,
        ttl_s: float,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.runner = runner
        self.ttl_s = ttl_s
        self.interval_s = interval_s
        self.clock = clock
        self.deleted = {"conversations": 0, "turns": 0, "summaries": 0}
        self._task: asyncio.Task[None] | None = None

    async def sweep(self) -> dict[str, int]:
        """Delete what is older than the TTL now; returns what went."""
        counts = await self.store.delete_inactive(self.clock() - self.ttl_s, keep=self.runner.busy_conversations())
        for name, count in counts.items():
            self.deleted[name] += count
        if counts["conversations"]:
            log.info(
                "history TTL: deleted %d conversation(s), %d turn(s), %d summary(ies) inactive for over %.0f s",
                counts["conversations"],
                counts["turns"],
                counts["summaries"],
                self.ttl_s,
            )
        return counts

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # a failed sweep is retried at the next interval
                log.error("history TTL sweep failed", exc_info=exc)
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
