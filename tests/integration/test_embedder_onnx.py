"""all-MiniLM-L6-v2 on ONNX Runtime against the same model on PyTorch: same vectors, same token counts, an export
made once and reused, and a clear refusal or fallback for a model it cannot run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from anaphora import Settings
from anaphora.embeddings import load_embedder
from anaphora.embeddings.sentence_transformers import SentenceTransformerEmbedder, embedded_minilm_path
from anaphora.errors import ModelError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEXTS = [
    "How do I install it on Kubernetes?",
    "and on ARM?",
    "Wie rotiere ich die TLS-Zertifikate des Kollektors?",
    "x",
    "The listener terminates TLS before the pipeline sees a byte. " * 60,  # beyond 256 tokens: truncated alike
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="module")
def both(cache_dir: Path, tmp_path_factory) -> tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]:
    data = tmp_path_factory.mktemp("data")
    onnx = load_embedder(
        Settings(data_dir=data, cache_dir=cache_dir, embedder_runtime="onnx", embedder_precision="fp32")
    )
    torch = load_embedder(Settings(data_dir=data, cache_dir=cache_dir, embedder_runtime="torch"))
    return onnx, torch


def test_same_vectors_and_token_counts(both) -> None:
    onnx, torch = both
    assert onnx.active_runtime == "onnx" and torch.active_runtime == "torch"
    assert onnx.name == torch.name == "all-MiniLM-L6-v2" and onnx.dim == torch.dim == 384
    ours, reference = onnx.embed(TEXTS), torch.embed(TEXTS)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(ours * reference, axis=1)) > 1 - 1e-4
    assert [onnx.count_tokens(t) for t in TEXTS] == [torch.count_tokens(t) for t in TEXTS]
    assert onnx.count_tokens(TEXTS[-1]) > 256  # counting never truncates
    # batches split by batch_size give the same rows as one batch
    onnx.batch_size = 2
    assert np.allclose(onnx.embed(TEXTS), ours, atol=1e-5)


def test_export_is_made_once_and_reused(both, cache_dir: Path, tmp_path) -> None:
    exports = list((cache_dir / "onnx").glob("all-MiniLM-L6-v2-*.onnx"))
    assert len(exports) == 1
    before = exports[0].stat().st_mtime_ns
    again = load_embedder(
        Settings(data_dir=tmp_path, cache_dir=cache_dir, embedder_runtime="onnx", embedder_precision="fp32")
    )
    again.warm_up()
    assert again._model is None, "a cached export needs no PyTorch model"
    assert exports[0].stat().st_mtime_ns == before
    assert list((cache_dir / "onnx").iterdir()) == exports  # no scratch files left behind


@pytest.fixture
def cls_pooling_model(tmp_path) -> Path:
    """A copy of MiniLM whose pooling is CLS: a layout the ONNX export does not cover."""
    copy = tmp_path / "cls-model"
    shutil.copytree(embedded_minilm_path(), copy)
    config = copy / "1_Pooling" / "config.json"
    pooling = json.loads(config.read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    config.write_text(json.dumps(pooling))
    return copy


def test_onnx_refuses_an_unsupported_model_with_a_hint(cls_pooling_model: Path, tmp_path) -> None:
    embedder = SentenceTransformerEmbedder(cls_pooling_model, runtime="onnx", cache_dir=tmp_path / "cache")
    with pytest.raises(ModelError) as caught:
        embedder.embed(["hello"])
    assert "ONNX" in str(caught.value) and "embedder_runtime".upper() in caught.value.hint.upper()


def test_auto_falls_back_to_torch_for_an_unsupported_model(cls_pooling_model: Path, tmp_path) -> None:
    embedder = SentenceTransformerEmbedder(cls_pooling_model, runtime="auto", cache_dir=tmp_path / "cache")
    assert embedder.active_runtime == "torch"
    assert embedder.embed(["hello"]).shape == (1, 384)
    assert not (tmp_path / "cache" / "onnx").exists() or not any((tmp_path / "cache" / "onnx").iterdir())


def test_an_unwritable_cache_dir_falls_back_or_is_reported(tmp_path) -> None:
    not_a_dir = tmp_path / "cache-is-a-file"
    not_a_dir.write_text("")
    auto = SentenceTransformerEmbedder(embedded_minilm_path(), runtime="auto", cache_dir=not_a_dir)
    assert auto.active_runtime == "torch" and auto.embed(["hello"]).shape == (1, 384)
    strict = SentenceTransformerEmbedder(embedded_minilm_path(), runtime="onnx", cache_dir=not_a_dir)
    with pytest.raises(ModelError, match="cannot write the export"):
        strict.warm_up()
