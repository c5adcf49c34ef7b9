"""Concurrent query embeddings share model batches, and each caller gets its own rows back."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from anaphora.embeddings.batching import BatchingEmbedder
from anaphora.embeddings.hashing import HashingEmbedder

pytestmark = pytest.mark.unit


class SlowCounting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts):
        import time

        self.calls.append(len(texts))
        time.sleep(0.02)
        return super().embed(texts)


async def test_concurrent_requests_are_coalesced_and_routed_back() -> None:
    inner = SlowCounting()
    batching = BatchingEmbedder(inner)
    texts = [[f"query {i}", f"alternate {i}"] for i in range(10)]
    results = await asyncio.gather(*(batching.embed(t) for t in texts))
    for t, vectors in zip(texts, results, strict=True):
        assert np.allclose(vectors, inner.embed(t))
    assert sum(inner.calls[: batching.batches]) == 20
    assert batching.batches < 10  # fewer model calls than requests


async def test_an_error_reaches_every_waiting_caller_and_later_calls_work() -> None:
    class Failing(HashingEmbedder):
        fail = True

        def embed(self, texts):
            if self.fail:
                raise RuntimeError("model down")
            return super().embed(texts)

    inner = Failing()
    batching = BatchingEmbedder(inner)
    outcomes = await asyncio.gather(batching.embed(["a"]), batching.embed(["b"]), return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    inner.fail = False
    assert (await batching.embed(["c"])).shape == (1, inner.dim)
