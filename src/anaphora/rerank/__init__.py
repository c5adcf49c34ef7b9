"""Second-stage reranking behind one Protocol: cross-encoder, HTTP endpoints, or the no-model fallback."""

from __future__ import annotations

from anaphora.backends import RERANKERS
from anaphora.rerank.base import NoModelReranker, Reranker
from anaphora.settings import ModelSettings


def load_reranker(settings: ModelSettings) -> Reranker:
    """'none', 'cross-encoder:/path', 'http:URL' (with ``rerank_style`` cohere|tei), or a scheme a package
    registers in the ``anaphora.rerankers`` entry-point group (:mod:`anaphora.backends`)."""
    return RERANKERS.load(settings.reranker, settings)


__all__ = ["NoModelReranker", "Reranker", "load_reranker"]
