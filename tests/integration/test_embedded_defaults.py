"""The embedded defaults for real: SmolLM2-135M via llama.cpp and all-MiniLM-L6-v2, over the sample corpus.

Assertions are on retrieved ids and on structure, never on the generated prose.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from anaphora import Anaphora, Settings, TurnResult
from anaphora.evaluation import retrieval_half
from tests.conftest import DEMO_SCRIPT, SAMPLE_DOCS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Anaphora:
    settings = Settings(data_dir=tmp_path_factory.mktemp("embedded"), answer_max_tokens=96)
    with Anaphora(settings) as rag:
        report = rag.ingest([SAMPLE_DOCS])
        assert not report.skipped and len(report.added) == 12
        yield rag


def expectations() -> list[dict]:
    turns = json.loads(DEMO_SCRIPT.read_text())["turns"]
    return [t for t in turns if t.get("kind") == "new_query" and t["expect"]]


def retrieved_sections(result: TurnResult) -> set[tuple[str, str]]:
    return {(p.source, p.heading.split(" > ")[-1]) for p in result.trace.retrieved}


def test_embedder_is_minilm_and_normalised(embedded: Anaphora) -> None:
    embedder = embedded.components.embedder
    assert embedder.name == "all-MiniLM-L6-v2-int8" and embedder.dim == 384  # int8 by default where ONNX runs
    query = embedded.components.retriever.embedder  # the search's queries at full precision, over the same cache
    assert query.name == "all-MiniLM-L6-v2" and query.dim == 384 and query.cache is embedder.cache
    vectors = embedder.inner.embed(["Kestrel ships logs", "ARM nodes"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert embedder.count_tokens("Kestrel ships logs") >= 3


@pytest.mark.parametrize("turn", expectations(), ids=lambda t: t["user"])
def test_standalone_questions_retrieve_the_expected_section(embedded: Anaphora, turn: dict) -> None:
    result = embedded.ask(turn["user"])
    wanted = {(e["source"], e["heading"]) for e in turn["expect"]}
    assert wanted & retrieved_sections(result), retrieved_sections(result)
    assert result.trace.model_calls == 0  # the embedded default quotes the passages (answer_mode unset)
    assert result.trace.answer_source == "extractive" and result.citations
    assert result.answer.strip()


def test_real_model_streams_checked_units_and_persists(embedded: Anaphora) -> None:
    """The model answering (answer_mode = generate, check drop): the stream, released unit by unit, adds up to the
    stored answer."""
    settings = embedded.settings.with_updates(answer_mode="generate")
    with Anaphora(settings) as generating:
        conversation = generating.new_conversation()
        *deltas, result = list(generating.stream("How do I install Kestrel on Kubernetes?", conversation))
        stored = generating._runner.run(generating.components.conversations.turns("local", conversation))
    assert "".join(deltas) == result.answer and result.answer
    assert result.trace.model_calls == 1 and result.trace.answer_source in ("model", "abstain")
    assert result.trace.prompt_tokens > 100  # counted with the GGUF tokenizer
    assert stored[0].answer == result.answer


def test_query_embeddings_are_cached(embedded: Anaphora) -> None:
    half = retrieval_half(embedded.components)
    query = embedded.components.retriever.embedder  # the search's queries: the same model at fp32, same cache
    question = "How do I rotate the Kestrel token?"
    embedded.run(half.run(question, []))  # the retrieval half: one query embedding
    hits = query.hits
    embedded.run(half.run(question, []))
    assert query.hits == hits + 1
    answered = embedded.ask(question)
    hits = query.hits
    again = embedded.ask(question)  # a whole turn again: its search's query comes from the cache
    assert again.answer == answered.answer and query.hits > hits
