"""Second-stage reranking behind one Protocol: cross-encoder, HTTP endpoints, or the no-model fallback."""

from __future__ import annotations

from anaphora.errors import ConfigurationError
from anaphora.rerank.base import NoModelReranker, Reranker
from anaphora.settings import ModelSettings


def load_reranker(settings: ModelSettings) -> Reranker:
    """'none', 'cross-encoder:/path', or 'http:URL' (with ``rerank_style`` cohere|tei)."""
    spec = settings.reranker.strip()
    scheme, _, argument = spec.partition(":")
    if scheme == "none":
        return NoModelReranker()
    if scheme == "cross-encoder" and argument:
        from anaphora.rerank.cross_encoder import CrossEncoderReranker

        return CrossEncoderReranker(argument)
    if scheme == "http" and argument:
        from anaphora.rerank.http import HTTPReranker

        return HTTPReranker(
            argument,
            style=settings.rerank_style,
            model=settings.rerank_model,
            api_key=settings.rerank_api_key.get_secret_value(),
            timeout_s=settings.rerank_timeout_s,
        )
    raise ConfigurationError(
        f"unknown reranker {spec!r}",
        hint="use 'none', 'cross-encoder:/path/to/model' or 'http:http://host:port/rerank'",
    )


__all__ = ["NoModelReranker", "Reranker", "load_reranker"]
