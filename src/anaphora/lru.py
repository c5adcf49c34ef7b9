"""The one bounded least-recently-used mapping behind the in-process caches (passages, sentence vectors, token
counts, per-user memory indexes). Written here rather than taken from ``cachetools``: these few lines are all the
caches need, and each owner already holds a lock of its own around what it does with the cache (counters,
generations), so the mapping itself is not locked."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most ``max_entries`` entries; reading or writing an entry makes it the most recent, and the least recent
    ones go first when there are too many. Not thread-safe: the owner locks."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"an LRU cache needs room for at least one entry, not {max_entries}")
        self.max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """The keys, least recent first (a snapshot: the cache may change while it is read)."""
        return iter(list(self._entries))

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The entries held among ``keys``, each made the most recent."""
        found = {key: self._entries[key] for key in keys if key in self._entries}
        for key in found:
            self._entries.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        self.put_many([(key, value)])

    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        for key, value in items:
            self._entries[key] = value
            self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
