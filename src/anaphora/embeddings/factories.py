"""The built-in embedders' factories, registered in the ``anaphora.embedders`` entry-point group
(:data:`anaphora.backends.EMBEDDERS`): each ``(argument, settings: Settings) -> Embedder``, loading nothing yet."""

from __future__ import annotations

from typing import Any

from anaphora.embeddings.base import Embedder
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.errors import ConfigurationError
from anaphora.settings import Settings


def hashing(argument: str, settings: Settings) -> Embedder:
    """``hashing`` or ``hashing:DIM``: no model, words hashed into DIM (384) dimensions."""
    return HashingEmbedder(int(argument) if argument else 384)


def _runtime(settings: Settings) -> dict[str, Any]:
    return {
        "batch_size": settings.ingest.embed_batch_size,
        "runtime": settings.models.embedder_runtime,
        "cache_dir": settings.cache_dir,
        "threads": settings.models.embedder_threads,
        "spin_wait": settings.models.embedder_spin_wait,
        "precision": settings.models.embedder_precision,
    }


def minilm(argument: str, settings: Settings) -> Embedder:
    """The bundled all-MiniLM-L6-v2 (the ``embedded`` extra)."""
    from anaphora.embeddings.sentence_transformers import SentenceTransformerEmbedder, embedded_minilm_path

    return SentenceTransformerEmbedder(embedded_minilm_path(), name="all-MiniLM-L6-v2", **_runtime(settings))


def sentence_transformers(argument: str, settings: Settings) -> Embedder:
    """``sentence-transformers:/path``: a sentence-transformers model directory."""
    from anaphora.embeddings.sentence_transformers import SentenceTransformerEmbedder

    if not argument:
        raise ConfigurationError(
            "'sentence-transformers:' needs a model directory", hint="use sentence-transformers:/path/to/model"
        )
    return SentenceTransformerEmbedder(argument, **_runtime(settings))
