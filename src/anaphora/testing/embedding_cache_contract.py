"""The contract every :class:`~anaphora.store.protocols.EmbeddingCache` must honour, as a pytest suite to subclass.

A backend's test module subclasses :class:`EmbeddingCacheContract` and provides a ``cache`` fixture: an empty cache,
closed afterwards::

    class TestMyCache(EmbeddingCacheContract):
        @pytest.fixture
        def cache(self):
            cache = MyCache(...)
            yield cache
            cache.close()

Rules: what was put is got back bit for bit as float32 rows of the same length; a miss is an absent key, never an
error or a zero vector; putting a key again replaces its vector; ``delete_many`` removes the keys that exist and
counts only those; empty requests are no-ops; batches larger than any backend's internal batch work the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from anaphora.store.protocols import EmbeddingCache


def vectors(n: int, dim: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"{seed}-{i:05d}": rng.normal(size=dim).astype(np.float32) for i in range(n)}


class EmbeddingCacheContract:
    @pytest.fixture
    def cache(self) -> EmbeddingCache:  # pragma: no cover - overridden
        raise NotImplementedError("an EmbeddingCacheContract subclass must provide a `cache` fixture")

    def test_round_trip_is_exact_float32(self, cache) -> None:
        items = vectors(5)
        items["wide"] = np.linspace(-1e30, 1e30, 8, dtype=np.float64)  # stored as float32, as queries compare
        cache.put_many(items)
        found = cache.get_many(list(items))
        assert set(found) == set(items)
        for key, vector in items.items():
            assert found[key].dtype == np.float32 and found[key].shape == (8,)
            np.testing.assert_array_equal(found[key], vector.astype(np.float32))

    def test_misses_are_absent_keys(self, cache) -> None:
        cache.put_many(vectors(2))
        found = cache.get_many(["0-00000", "never-stored", "0-00001"])
        assert set(found) == {"0-00000", "0-00001"}
        assert cache.get_many(["never-stored"]) == {}

    def test_putting_a_key_again_replaces_it(self, cache) -> None:
        cache.put_many({"k": np.zeros(4, dtype=np.float32)})
        cache.put_many({"k": np.arange(4, dtype=np.float32)})
        np.testing.assert_array_equal(cache.get_many(["k"])["k"], np.arange(4, dtype=np.float32))

    def test_vectors_of_different_lengths_coexist(self, cache) -> None:
        cache.put_many({"short": np.ones(3, dtype=np.float32), "long": np.ones(384, dtype=np.float32)})
        found = cache.get_many(["short", "long"])
        assert found["short"].shape == (3,) and found["long"].shape == (384,)

    def test_delete_counts_only_existing_keys(self, cache) -> None:
        items = vectors(3)
        cache.put_many(items)
        first, second, third = list(items)
        assert cache.delete_many([first, "never-stored", second]) == 2
        assert set(cache.get_many(list(items))) == {third}
        assert cache.delete_many([first]) == 0

    def test_empty_requests_are_no_ops(self, cache) -> None:
        cache.put_many({})
        assert cache.get_many([]) == {}
        assert cache.delete_many([]) == 0

    def test_large_batches(self, cache) -> None:
        items = vectors(2500, dim=16, seed=1)
        cache.put_many(items)
        keys = [*items, "never-stored"]
        found = cache.get_many(keys)
        assert len(found) == 2500
        sample = list(items)[1234]
        np.testing.assert_array_equal(found[sample], items[sample])
        assert cache.delete_many(keys) == 2500
        assert cache.get_many(keys) == {}
