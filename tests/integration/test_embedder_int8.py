"""all-MiniLM-L6-v2 quantized to int8 by ONNX Runtime: made once from the fp32 export and cached under a name that
carries the precision, vectors close to fp32's, an index embedded at one precision refused at the other until the
next ingestion re-embeds it, and ``auto`` (int8 where ONNX Runtime runs it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from anaphora import Settings
from anaphora.app import Anaphora
from anaphora.embeddings import load_embedder
from anaphora.embeddings.sentence_transformers import SentenceTransformerEmbedder, embedded_minilm_path
from anaphora.errors import ConfigurationError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEXTS = [
    "How do I install it on Kubernetes?",
    "and on ARM?",
    "Retention is handled by the compactor: set retention_enabled to true and a retention_period per tenant.",
    "Wie rotiere ich die TLS-Zertifikate des Kollektors?",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


def test_int8_is_made_once_named_apart_and_close_to_fp32(cache_dir: Path) -> None:
    fp32 = load_embedder(Settings(cache_dir=cache_dir, embedder_precision="fp32"))
    int8 = load_embedder(Settings(cache_dir=cache_dir, embedder_precision="int8"))
    assert fp32.name == "all-MiniLM-L6-v2" and int8.name == "all-MiniLM-L6-v2-int8"
    ours, reference = int8.embed(TEXTS), fp32.embed(TEXTS)
    assert ours.shape == reference.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
    assert np.min(np.sum(ours * reference, axis=1)) > 0.95
    assert not np.allclose(ours, reference, atol=1e-4)  # really another model
    exports = sorted((p.name for p in (cache_dir / "onnx").iterdir()), key=lambda name: name.rsplit("-", 1)[1])
    assert [name.rsplit("-", 1)[1] for name in exports] == ["fp32.onnx", "int8.onnx"]
    assert np.mean(1 - np.sum(ours * reference, axis=1)) < 0.02
    graph = onnx.load(str(cache_dir / "onnx" / exports[1])).graph
    assert sum(node.op_type == "QAttention" for node in graph.node) == 6  # every layer's attention fused, in int8
    stamp = (cache_dir / "onnx" / exports[1]).stat().st_mtime_ns
    again = load_embedder(Settings(cache_dir=cache_dir, embedder_precision="int8"))
    again.warm_up()
    assert again._model is None, "a cached int8 model needs no PyTorch"
    assert (cache_dir / "onnx" / exports[1]).stat().st_mtime_ns == stamp
    assert np.allclose(again.embed(TEXTS), ours, atol=1e-6)


def test_int8_needs_onnx_runtime() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SentenceTransformerEmbedder(embedded_minilm_path(), runtime="torch", precision="int8", cache_dir=Path("/tmp"))
    assert "ANAPHORA_EMBEDDER_PRECISION=fp32" in (caught.value.hint or "")


def test_an_index_embedded_at_fp32_is_refused_at_int8_then_re_embedded(cache_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "retention.md").write_text("# Retention\n\nThe compactor deletes chunks older than retention_period.\n")
    common = {"data_dir": tmp_path / "data", "cache_dir": cache_dir, "chat_model": "fake"}
    with Anaphora(**common, embedder_precision="fp32") as rag:
        rag.ingest([docs])
    with Anaphora(**common, embedder_precision="int8") as rag:
        with pytest.raises(ConfigurationError) as caught:
            rag.ask("how long are chunks kept?")
        assert "all-MiniLM-L6-v2-int8" in caught.value.message
        assert "ANAPHORA_EMBEDDER_PRECISION=fp32" in (caught.value.hint or "")
        assert "anaphora ingest PATH re-embeds" in (caught.value.hint or "")
        lines: list[str] = []
        report = rag.ingest([docs], notice=lines.append)  # every stored passage re-embedded at int8, with a line
        assert report.reembedded == ("all-MiniLM-L6-v2", 1) and "with all-MiniLM-L6-v2-int8" in lines[0]
        assert report.updated == ["retention.md"]  # the fingerprint names the embedder too
        assert rag.ask("how long are chunks kept?").citations


def test_auto_is_int8_where_onnx_runtime_runs_it_else_fp32() -> None:
    path = embedded_minilm_path()
    auto = SentenceTransformerEmbedder(
        path, name="all-MiniLM-L6-v2", runtime="auto", precision="auto", cache_dir=Path("/tmp")
    )
    assert auto.precision == "int8" and auto.name == "all-MiniLM-L6-v2-int8"
    torch = SentenceTransformerEmbedder(
        path, name="all-MiniLM-L6-v2", runtime="torch", precision="auto", cache_dir=Path("/tmp")
    )
    assert torch.precision == "fp32" and torch.name == "all-MiniLM-L6-v2"  # no error: auto asks for nothing
    assert SentenceTransformerEmbedder(path, runtime="auto", precision="auto").precision == "fp32"  # no cache dir
