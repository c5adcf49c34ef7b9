"""Embedders behind one Protocol, chosen by a spec string."""

from __future__ import annotations

from anaphora.backends import EMBEDDERS
from anaphora.embeddings.base import CachedEmbedder, Embedder, KnownVectors, cache_key
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.settings import Settings


def load_embedder(settings: Settings) -> Embedder:
    """'minilm' (bundled), 'sentence-transformers:/path', 'hashing' (no model), or a scheme a package registers in
    the ``anaphora.embedders`` entry-point group (:mod:`anaphora.backends`)."""
    return EMBEDDERS.load(settings.models.embedder, settings)


__all__ = ["CachedEmbedder", "Embedder", "HashingEmbedder", "KnownVectors", "cache_key", "load_embedder"]
