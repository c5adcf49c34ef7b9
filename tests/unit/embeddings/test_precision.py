"""``embedder_precision = "auto"`` resolves from the settings and the installation alone: int8 where ONNX Runtime
runs it, else fp32, so one installation always gives one embedder name (and one index)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from anaphora.embeddings.onnx_runtime import precision_name, resolve_precision

pytestmark = pytest.mark.unit


def test_auto_is_int8_on_onnx_runtime_with_a_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert resolve_precision("auto", "auto", Path("/cache")) == "int8"
    assert resolve_precision("auto", "onnx", Path("/cache")) == "int8"


def test_auto_is_fp32_where_int8_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert resolve_precision("auto", "torch", Path("/cache")) == "fp32"
    assert resolve_precision("auto", "auto", None) == "fp32"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else object())
    assert resolve_precision("auto", "auto", Path("/cache")) == "fp32"


def test_an_explicit_precision_is_kept() -> None:
    assert resolve_precision("fp32", "auto", Path("/cache")) == "fp32"
    assert resolve_precision("int8", "torch", None) == "int8"  # the embedder refuses it with a hint
    assert precision_name("all-MiniLM-L6-v2", "int8") == "all-MiniLM-L6-v2-int8"


def test_the_search_queries_an_int8_index_at_full_precision(tmp_path: Path) -> None:
    """Asymmetric precision: the passages' embedder at int8, the queries' the same model at fp32, over one cache;
    an embedder with no precision of its own (or ``embedder_query_precision = "same"``) embeds the queries itself."""
    from anaphora.app import build_query_embedder
    from anaphora.embeddings import CachedEmbedder, load_embedder
    from anaphora.settings import Settings

    class NoCache:
        def get_many(self, keys: list[str]) -> dict:
            return {}

        def put_many(self, items: dict) -> None: ...

    int8 = Settings(data_dir=tmp_path, cache_dir=tmp_path, embedder="minilm", embedder_precision="int8")
    passages = CachedEmbedder(load_embedder(int8), NoCache())
    query = build_query_embedder(int8, passages)
    assert (passages.name, query.name) == ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2")
    assert query is not passages and query.cache is passages.cache
    same = int8.model_copy(update={"models": int8.models.model_copy(update={"embedder_query_precision": "same"})})
    assert build_query_embedder(same, passages) is passages
    hashing = Settings(data_dir=tmp_path, embedder="hashing")
    plain = CachedEmbedder(load_embedder(hashing), NoCache())
    assert build_query_embedder(hashing, plain) is plain
