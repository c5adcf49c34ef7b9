"""The bounded LRU mapping behind the in-process caches."""

from __future__ import annotations

import pytest

from anaphora.lru import Lru


def test_least_recently_used_goes_first():
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and list(cache) == ["a", "c"]


def test_get_many_refreshes_and_put_many_evicts_once():
    cache: Lru[int, str] = Lru(3)
    cache.put_many([(1, "x"), (2, "y"), (3, "z")])
    assert cache.get_many([3, 1, 9]) == {3: "z", 1: "x"}
    cache.put_many([(4, "w"), (5, "v")])
    assert list(cache) == [1, 4, 5] and len(cache) == 3


def test_pop_and_clear():
    cache: Lru[str, int] = Lru(4)
    cache.put("a", 1)
    assert cache.pop("a") == 1 and cache.pop("a") is None
    cache.put("b", 2)
    cache.clear()
    assert len(cache) == 0 and cache.get("b") is None


def test_no_room_is_refused():
    with pytest.raises(ValueError, match="at least one entry"):
        Lru(0)
