"""The route is decided in one place: the router stage, before any model call. A model's structured analysis
(``rewriter = "analysis"``) is the query stage's proposal, which the skip gate weighs; it never rewrites the route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.reading.message import read
from anaphora.reading.route import route_turn
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

FIRST = "How do I install Kestrel on Kubernetes?"
COVERED = "and on Kubernetes, how do I install Kestrel?"  # every content word already in the conversation
NEW_WORDS = "and what about the TLS certificates?"


def analysis(kind: str, answered: bool = False) -> str:
    return json.dumps({"kind": kind, "answered_by_conversation": answered, "query": FIRST})


@pytest.fixture
def analysed(tmp_path: Path):
    settings = Settings(
        data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", similarity_threshold=0.0, rewriter="analysis"
    )
    model = FakeChatModel()
    with Anaphora(settings, model=model) as rag:
        rag.ingest([SAMPLE_DOCS])
        yield rag, model


def test_only_the_router_writes_the_route(analysed) -> None:
    rag, _ = analysed
    writers = [s.name for s in rag.components.engine.stages if "route" in s.writes]
    assert writers == ["route"]


def test_a_model_that_calls_a_covered_turn_chit_chat_skips_retrieval_but_keeps_the_route(analysed) -> None:
    rag, model = analysed
    conversation = rag.new_conversation()
    rag.ask(FIRST, conversation)
    model.enqueue(analysis("chit_chat"))
    result = rag.ask(COVERED, conversation)
    trace = result.trace
    assert trace.retrieval_skipped
    assert trace.route_reason == "model analysis: the conversation holds the answer"
    assert trace.route == route_turn(read(COVERED), True).kind == "follow_up"  # the router's, not the model's
    assert "the analysis says chit_chat" in trace.stage("query").detail


@pytest.mark.parametrize("kind", ["meta", "chit_chat"])
def test_a_model_proposal_is_refused_when_the_message_brings_new_words(analysed, kind: str) -> None:
    rag, model = analysed
    conversation = rag.new_conversation()
    rag.ask(FIRST, conversation)
    model.enqueue(analysis(kind, answered=True))
    result = rag.ask(NEW_WORDS, conversation)
    assert not result.trace.retrieval_skipped
    assert result.trace.stage("retrieve").status == "ok"
    assert result.trace.route == route_turn(read(NEW_WORDS), True).kind
