"""The built-in rerankers' factories, registered in the ``anaphora.rerankers`` entry-point group
(:data:`anaphora.backends.RERANKERS`): each ``(argument, settings: ModelSettings) -> Reranker``, loading nothing yet."""

from __future__ import annotations

from anaphora.errors import ConfigurationError
from anaphora.rerank.base import NoModelReranker, Reranker
from anaphora.settings import ModelSettings


def _needs(spec: str, example: str) -> ConfigurationError:
    return ConfigurationError(
        f"'{spec}:' needs an argument", hint=f"use {spec}:{example}, or 'none' to keep the first stage's order"
    )


def none(argument: str, settings: ModelSettings) -> Reranker:
    """No second stage: the first stage's order stands."""
    return NoModelReranker()


def cross_encoder(argument: str, settings: ModelSettings) -> Reranker:
    """``cross-encoder:/path``: a sentence-transformers CrossEncoder directory, in process."""
    if not argument:
        raise _needs("cross-encoder", "/path/to/model")
    from anaphora.rerank.cross_encoder import CrossEncoderReranker

    return CrossEncoderReranker(argument)


def http(argument: str, settings: ModelSettings) -> Reranker:
    """``http:URL``: a rerank endpoint, in the Cohere or TEI shape (``rerank_style``)."""
    if not argument:
        raise _needs("http", "http://host:port/rerank")
    from anaphora.rerank.http import HTTPReranker

    return HTTPReranker(
        argument,
        style=settings.rerank_style,
        model=settings.rerank_model,
        api_key=settings.rerank_api_key.get_secret_value(),
        timeout_s=settings.rerank_timeout_s,
    )
