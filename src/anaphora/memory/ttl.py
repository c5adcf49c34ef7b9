"""The memory TTL on the read side: items from turns older than ``memory_ttl_days`` are not recalled, even before
the service's sweep (:class:`~anaphora.server.history_sweeper.MemorySweeper`) deletes them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from anaphora.memory.protocols import MemoryReader
from anaphora.memory.types import MemoryHit, MemoryItem, Profile


class UnexpiredMemory:
    """A :class:`MemoryReader` over ``reader`` that reads no item whose ``time`` is more than ``ttl_s`` ago.

    The searches pass through (their hits carry ids only); recall reads every hit's item with :meth:`get_many`,
    which leaves expired ones out exactly as it leaves out ids that were deleted meanwhile."""

    def __init__(self, reader: MemoryReader, ttl_s: float, *, clock: Callable[[], float] = time.time) -> None:
        self.reader = reader
        self.ttl_s = ttl_s
        self.clock = clock

    async def lexical(self, user_id: str, queries: Sequence[str], k: int) -> list[list[MemoryHit]]:
        return await self.reader.lexical(user_id, queries, k)

    async def dense(self, user_id: str, vectors: np.ndarray, k: int) -> list[list[MemoryHit]]:
        return await self.reader.dense(user_id, vectors, k)

    async def get_many(self, user_id: str, item_ids: Sequence[str]) -> dict[str, MemoryItem]:
        since = self.clock() - self.ttl_s
        found = await self.reader.get_many(user_id, item_ids)
        return {item_id: item for item_id, item in found.items() if item.time >= since}

    async def profile(self, user_id: str) -> Profile | None:
        return await self.reader.profile(user_id)


def within_ttl(reader: MemoryReader, ttl_s: float | None) -> MemoryReader:
    """``reader`` as recall should see it under ``memory_ttl_days`` (``None``: everything is kept)."""
    return reader if ttl_s is None else UnexpiredMemory(reader, ttl_s)
