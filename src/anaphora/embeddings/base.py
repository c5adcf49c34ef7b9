"""The embedder interface and the content-hash cache in front of any embedder.

A turn that leaves nothing stored (a stateless chat completion, ``store: false``, a temporary chat) must not leave
its words in the persistent cache either: keyed by a hash of the text, such an entry is personal data that erasing
the user cannot name. Such a turn runs inside :func:`unpersisted_embeddings`; the cache is still read, never written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

import numpy as np

from anaphora.store.protocols import EmbeddingCache


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dim)``.

    ``embed`` is blocking (CPU work); async callers run it in a thread. ``count_tokens`` uses the embedder's own
    tokenizer so chunk sizes respect its input length.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class KnownVectors(Protocol):
    """Vectors already computed for some texts (the cache of an embedder), read without embedding or storing any:
    ``known`` returns those it holds, by text; the others are absent."""

    def known(self, texts: Sequence[str]) -> dict[str, np.ndarray]: ...


_UNPERSISTED: ContextVar[bool] = ContextVar("anaphora_unpersisted_embeddings", default=False)


@contextmanager
def unpersisted_embeddings(active: bool = True) -> Iterator[None]:
    """Within this block (and the tasks and worker threads it starts), :class:`CachedEmbedder` writes nothing."""
    token = _UNPERSISTED.set(active)
    try:
        yield
    finally:
        _UNPERSISTED.reset(token)


def embeddings_persisted() -> bool:
    """False inside :func:`unpersisted_embeddings`."""
    return not _UNPERSISTED.get()


def cache_key(embedder_name: str, text: str) -> str:
    return hashlib.sha256(f"{embedder_name}\x00{text}".encode()).hexdigest()


class CachedEmbedder:
    """Looks every text up by (model, text) hash first and embeds only the misses, which it stores unless called
    within :func:`unpersisted_embeddings`; counts hits and misses."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache) -> None:
        self.inner = embedder
        self.cache = cache
        self.name = embedder.name
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:  # read lazily: asking loads the model
        return self.inner.dim

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def known(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors the cache holds for ``texts``, by text; nothing is embedded and nothing is written (a text
        whose vector must not enter the shared cache may still reuse one that is there already)."""
        keys = {t: cache_key(self.name, t) for t in dict.fromkeys(texts)}
        found = self.cache.get_many(list(keys.values())) if keys else {}
        return {t: found[k] for t, k in keys.items() if k in found}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        keys = [cache_key(self.name, t) for t in texts]
        found = self.cache.get_many(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        self.hits += len(texts) - sum(1 for k in keys if k not in found)
        self.misses += sum(1 for k in keys if k not in found)
        if missing:
            fresh = self.inner.embed(missing)
            new = {cache_key(self.name, t): v for t, v in zip(missing, fresh, strict=True)}
            if embeddings_persisted():
                self.cache.put_many(new)
            found.update(new)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
