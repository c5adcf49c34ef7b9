"""HTTPReranker against a real local HTTP server (Cohere and TEI shapes), load_reranker, and the engine with an
HTTP reranker that answers or is down."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from anaphora import Anaphora, ConfigurationError, FakeChatModel, ModelNotFoundError, ModelUnavailableError, Settings
from anaphora.rerank import NoModelReranker, load_reranker
from anaphora.rerank.http import HTTPReranker
from tests.conftest import SAMPLE_DOCS
from tests.local_http import serving

pytestmark = pytest.mark.unit


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class RerankServer:
    """What the fake endpoint answers: ``mode`` is cohere | tei | status | raw; scores come from ``scorer``."""

    url: str
    mode: str = "cohere"
    status: int = 500
    raw: bytes = b""
    scorer: Any = None
    requests: list[Recorded] = field(default_factory=list)


def default_scorer(query: str, texts: list[str]) -> list[float]:
    """Later texts score higher: a reranker that reverses the first-stage order."""
    n = len(texts)
    return [(i + 1) / n for i in range(n)]


@pytest.fixture
def server() -> Iterator[RerankServer]:
    state = RerankServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep the test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"null")
            state.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if state.mode == "status":
                self._send(state.status, b'{"error": "model exploded"}')
                return
            if state.mode == "raw":
                self._send(200, state.raw)
                return
            texts = body["documents"] if state.mode == "cohere" else body["texts"]
            scores = (state.scorer or default_scorer)(body["query"], texts)
            order = list(range(len(texts)))
            order = order[1::2] + order[::2]  # shuffled: the client must map by index, not by position
            if state.mode == "cohere":
                payload: Any = {"results": [{"index": i, "relevance_score": scores[i]} for i in order]}
            else:
                payload = [{"index": i, "score": scores[i]} for i in order]
            self._send(200, json.dumps(payload).encode())

        def _send(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    with serving(httpd) as base_url:
        state.url = f"{base_url}/v1/rerank"
        yield state


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TEXTS = ["alpha passage", "beta passage", "gamma passage", "delta passage", "epsilon passage"]


# -- the client ----------------------------------------------------------------------------------------------------
async def test_cohere_request_shape_and_scores_in_input_order(server: RerankServer) -> None:
    reranker = HTTPReranker(server.url, style="cohere", model="rerank-v3", api_key="sekret")
    try:
        scores = await reranker.score("which passage?", TEXTS)
    finally:
        await reranker.aclose()
    assert scores == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    (request,) = server.requests
    assert request.path == "/v1/rerank"
    assert request.body == {"model": "rerank-v3", "query": "which passage?", "documents": TEXTS, "top_n": 5}
    assert request.headers["authorization"] == "Bearer sekret"
    assert request.headers["content-type"] == "application/json"
    assert reranker.name == f"http-cohere:{server.url}"


async def test_cohere_without_model_or_key_sends_neither(server: RerankServer) -> None:
    reranker = HTTPReranker(server.url)
    try:
        await reranker.score("q", TEXTS[:2])
    finally:
        await reranker.aclose()
    (request,) = server.requests
    assert "model" not in request.body
    assert "authorization" not in request.headers


async def test_tei_request_shape_and_scores_in_input_order(server: RerankServer) -> None:
    server.mode = "tei"
    server.scorer = lambda query, texts: [0.9 if "gamma" in t else 0.1 for t in texts]
    reranker = HTTPReranker(server.url, style="tei", model="ignored-by-tei")
    try:
        scores = await reranker.score("gamma?", TEXTS)
    finally:
        await reranker.aclose()
    assert scores == pytest.approx([0.1, 0.1, 0.9, 0.1, 0.1])
    (request,) = server.requests
    assert request.body == {"query": "gamma?", "texts": TEXTS, "raw_scores": False}
    assert reranker.name == f"http-tei:{server.url}"


async def test_scores_are_clamped_and_missing_indexes_score_zero(server: RerankServer) -> None:
    server.mode = "raw"
    server.raw = json.dumps(
        {"results": [{"index": 2, "relevance_score": 1.7}, {"index": 0, "relevance_score": -0.3}]}
    ).encode()
    reranker = HTTPReranker(server.url)
    try:
        scores = await reranker.score("q", TEXTS[:3])
    finally:
        await reranker.aclose()
    assert scores == [0.0, 0.0, 1.0]


async def test_no_texts_makes_no_request(server: RerankServer) -> None:
    reranker = HTTPReranker(server.url)
    try:
        assert await reranker.score("q", []) == []
    finally:
        await reranker.aclose()
    assert server.requests == []


async def test_http_error_status_is_model_unavailable(server: RerankServer) -> None:
    server.mode, server.status = "status", 500
    reranker = HTTPReranker(server.url)
    try:
        with pytest.raises(ModelUnavailableError) as caught:
            await reranker.score("q", TEXTS)
    finally:
        await reranker.aclose()
    assert "HTTP 500" in caught.value.message and "model exploded" in caught.value.message
    assert caught.value.hint and "ANAPHORA_RERANKER" in caught.value.hint


@pytest.mark.parametrize(
    "raw",
    [
        b"this is not json",
        b'{"results": [{"index": 0}]}',  # no score
        b'{"results": [{"index": 9, "relevance_score": 0.5}]}',  # index out of range
        b'{"data": []}',  # no results key
        b'[{"index": 0, "score": 0.5}]',  # a TEI answer to a Cohere request
    ],
)
async def test_malformed_answers_are_model_unavailable(server: RerankServer, raw: bytes) -> None:
    server.mode, server.raw = "raw", raw
    reranker = HTTPReranker(server.url, style="cohere")
    try:
        with pytest.raises(ModelUnavailableError) as caught:
            await reranker.score("q", TEXTS[:2])
    finally:
        await reranker.aclose()
    assert "unexpected answer" in caught.value.message
    assert caught.value.hint and "ANAPHORA_RERANK_STYLE" in caught.value.hint and "'cohere'" in caught.value.hint


async def test_connection_refused_is_model_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}/rerank"
    reranker = HTTPReranker(url, timeout_s=2.0)
    try:
        with pytest.raises(ModelUnavailableError) as caught:
            await reranker.score("q", TEXTS)
    finally:
        await reranker.aclose()
    assert url in caught.value.message and "did not answer" in caught.value.message
    assert caught.value.hint and "ANAPHORA_RERANKER=none" in caught.value.hint


# -- load_reranker -------------------------------------------------------------------------------------------------
def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", **overrides)


@pytest.mark.parametrize("spec", ["none", "  none  "])
def test_load_none(tmp_path: Path, spec: str) -> None:
    assert isinstance(load_reranker(settings_for(tmp_path, reranker=spec).models), NoModelReranker)


async def test_load_http_takes_style_model_key_and_timeout_from_settings(tmp_path: Path, server: RerankServer) -> None:
    server.mode = "tei"
    settings = settings_for(
        tmp_path,
        reranker=f"http:{server.url}",
        rerank_style="tei",
        rerank_model="bge-reranker",
        rerank_api_key="k3y",
        rerank_timeout_s=3.5,
    )
    reranker = load_reranker(settings.models)
    assert isinstance(reranker, HTTPReranker)
    try:
        assert (reranker.url, reranker.style, reranker.model) == (server.url, "tei", "bge-reranker")
        assert reranker.name == f"http-tei:{server.url}"
        assert reranker._client.timeout.read == 3.5
        await reranker.score("q", TEXTS[:2])
    finally:
        await reranker.aclose()
    assert server.requests[0].body == {"query": "q", "texts": TEXTS[:2], "raw_scores": False}
    assert server.requests[0].headers["authorization"] == "Bearer k3y"


async def test_load_http_defaults_to_cohere(tmp_path: Path) -> None:
    reranker = load_reranker(settings_for(tmp_path, reranker="http:http://127.0.0.1:1/v1/rerank").models)
    assert isinstance(reranker, HTTPReranker)
    await reranker.aclose()
    assert reranker.style == "cohere" and reranker.url == "http://127.0.0.1:1/v1/rerank"
    assert reranker.model == ""


def test_load_missing_cross_encoder_is_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        load_reranker(settings_for(tmp_path, reranker=f"cross-encoder:{tmp_path / 'missing'}").models)
    assert "missing" in caught.value.message
    assert caught.value.hint and "CrossEncoder.save()" in caught.value.hint


@pytest.mark.parametrize("spec", ["bogus", "cohere:http://x", "http:", "cross-encoder:", "", "None"])
def test_load_unknown_is_configuration_error(tmp_path: Path, spec: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_reranker(settings_for(tmp_path, reranker=spec).models)
    assert caught.value.hint and "'none'" in caught.value.hint


# -- through the engine --------------------------------------------------------------------------------------------
def close_reranker(rag: Anaphora) -> None:
    reranker = rag.components.stage_parts.selector.reranker
    if isinstance(reranker, HTTPReranker):
        rag._runner.run(reranker.aclose())


def test_engine_reranks_through_the_http_server(tmp_path: Path, server: RerankServer) -> None:
    settings = settings_for(tmp_path, reranker=f"http:{server.url}", similarity_threshold=0.0, rerank_threshold=0.3)
    model = FakeChatModel()
    rag = Anaphora(settings, model=model)
    try:
        rag.ingest([SAMPLE_DOCS])
        result = rag.ask("How do I install Kestrel on Kubernetes?")
        select = result.trace.stage("select")
        assert select.status == "ok"
        (request,) = server.requests
        sent = request.body["documents"]
        assert request.body["query"] == "How do I install Kestrel on Kubernetes?"
        assert len(sent) == settings.retrieval.candidates
        retrieved = result.trace.retrieved
        assert len(retrieved) == settings.retrieval.top_k
        scores = [p.rerank_score for p in retrieved]
        assert all(s is not None and s >= 0.3 for s in scores)
        assert scores == sorted(scores, reverse=True)
        # the server reversed the first-stage order: the last candidate sent is now first
        assert [p.text for p in retrieved] == sent[::-1][: settings.retrieval.top_k]
        assert retrieved[0].rerank_score == pytest.approx(1.0)
        assert "below rerank 0.3" in select.detail
        assert rag.components.engine.metrics.value("anaphora_reranker_requests_total", status="ok") == 1
        # the answer is built from the reranked passages
        assert result.citations and result.citations[0].id == retrieved[0].id
    finally:
        close_reranker(rag)
        rag.close()


def test_engine_answers_when_the_http_reranker_is_down(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/rerank"
    settings = settings_for(tmp_path, reranker=f"http:{url}", similarity_threshold=0.0, rerank_timeout_s=2.0)
    model = FakeChatModel()
    rag = Anaphora(settings, model=model)
    try:
        rag.ingest([SAMPLE_DOCS])
        result = rag.ask("How do I install Kestrel on Kubernetes?")
        select = result.trace.stage("select")
        assert select.status == "error"
        assert "ModelUnavailableError" in select.detail and "first-stage order" in select.detail
        assert result.trace.retrieved and all(p.rerank_score is None for p in result.trace.retrieved)
        assert not result.trace.abstained
        assert result.answer and len(model.calls) == 1
        assert rag.components.engine.metrics.value("anaphora_reranker_requests_total", status="error") == 1
    finally:
        close_reranker(rag)
        rag.close()


def test_closing_the_facade_closes_the_http_reranker(tmp_path: Path, server: RerankServer) -> None:
    rag = Anaphora(settings_for(tmp_path, reranker=f"http:{server.url}"), model=FakeChatModel())
    reranker = rag.components.stage_parts.selector.reranker
    assert isinstance(reranker, HTTPReranker)
    try:
        rag.close()
        assert reranker._client.is_closed
    finally:
        if not reranker._client.is_closed:
            asyncio.run(reranker.aclose())
