"""Embedders behind one Protocol, chosen by a spec string."""

from __future__ import annotations

from anaphora.embeddings.base import CachedEmbedder, Embedder, KnownVectors, cache_key
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.errors import ConfigurationError
from anaphora.settings import Settings


def load_embedder(settings: Settings) -> Embedder:
    """'minilm' (bundled), 'sentence-transformers:/path', or 'hashing' (no model)."""
    spec = settings.models.embedder.strip()
    scheme, _, argument = spec.partition(":")
    if scheme == "hashing":
        return HashingEmbedder(int(argument) if argument else 384)
    if scheme in ("minilm", "sentence-transformers"):
        from anaphora.embeddings.sentence_transformers import (
            SentenceTransformerEmbedder,
            embedded_minilm_path,
        )

        runtime = {
            "batch_size": settings.ingest.embed_batch_size,
            "runtime": settings.models.embedder_runtime,
            "cache_dir": settings.cache_dir,
            "threads": settings.models.embedder_threads,
            "spin_wait": settings.models.embedder_spin_wait,
            "precision": settings.models.embedder_precision,
        }
        if scheme == "minilm":
            return SentenceTransformerEmbedder(embedded_minilm_path(), name="all-MiniLM-L6-v2", **runtime)
        if not argument:
            raise ConfigurationError(
                "'sentence-transformers:' needs a model directory",
                hint="use sentence-transformers:/path/to/model",
            )
        return SentenceTransformerEmbedder(argument, **runtime)
    raise ConfigurationError(
        f"unknown embedder {spec!r}", hint="use 'minilm', 'sentence-transformers:/path' or 'hashing'"
    )


__all__ = ["CachedEmbedder", "Embedder", "HashingEmbedder", "KnownVectors", "cache_key", "load_embedder"]
