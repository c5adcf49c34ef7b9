"""The context length an OpenAI-compatible server reports (anaphora.models.served_context), read the way vLLM,
llama.cpp's server and hosted routers report it, and what the budget makes of it: the smaller of it and
``context_window``. A server that reports nothing, or is down, leaves the setting in charge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from anaphora import Settings
from anaphora.app import build_components
from anaphora.model_defaults import context_tokens
from anaphora.models import ModelCapabilities, load_chat_model
from anaphora.models.served_context import served_context_tokens
from anaphora.pipeline.stages import Budget
from tests.local_http import serving
from tests.unit.models.test_openai_compat import free_port

pytestmark = pytest.mark.unit


class Routes(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, str | None]] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Routes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        found = self.server.routes.get(self.path)
        payload = (found if isinstance(found, bytes) else json.dumps(found).encode()) if found is not None else b"{}"
        self.send_response(200 if found is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server(request) -> Iterator[tuple[str, Routes]]:
    httpd = Routes(request.param)
    with serving(httpd) as url:
        yield f"{url}/v1", httpd


def listing(*entries: dict) -> dict:
    return {"object": "list", "data": list(entries)}


VLLM = {"/v1/models": listing({"id": "qwen", "object": "model", "max_model_len": 32768})}
ROUTER = {"/v1/models": listing({"id": "other", "context_length": 4096}, {"id": "qwen", "context_length": 131072})}
LLAMA_SERVER = {
    "/v1/models": listing({"id": "model.gguf", "meta": {"n_ctx_train": 8192, "n_vocab": 49152}}),
    "/props": {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1},
}
LLAMA_SERVER_NO_PROPS = {"/v1/models": listing({"id": "model.gguf", "meta": {"n_ctx_train": 8192}})}
SILENT = {"/v1/models": listing({"id": "smollm2", "object": "model", "owned_by": "me", "permissions": []})}
MANY_UNNAMED = {"/v1/models": listing({"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 8192})}
NOT_JSON = {"/v1/models": b"<html>hello</html>", "/props": b"[1, 2]"}


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (VLLM, 32768),  # what vLLM was started with
        (ROUTER, 131072),  # the entry of the model asked for
        (LLAMA_SERVER, 2048),  # a slot's context, not the training length
        (LLAMA_SERVER_NO_PROPS, 8192),  # the training length, when nothing better is said
        (SILENT, None),  # llama-cpp-python's server, OpenAI, Ollama's /v1
        (MANY_UNNAMED, None),  # several models, none of them this one
        (NOT_JSON, None),
    ],
    indirect=["server"],
    ids=["vllm", "router", "llama-server", "llama-server-meta", "silent", "other-models", "not-json"],
)
def test_the_reported_context_is_read_where_each_server_puts_it(server, expected) -> None:
    base_url, _ = server
    assert served_context_tokens(base_url, "qwen", api_key="sk-1") == expected


@pytest.mark.parametrize("server", [VLLM], indirect=True)
def test_the_probe_sends_the_key(server) -> None:
    base_url, httpd = server
    served_context_tokens(base_url + "/", "qwen", api_key="sk-1")
    assert httpd.seen == [("/v1/models", "Bearer sk-1")]


def test_a_server_that_is_down_reports_nothing() -> None:
    assert served_context_tokens(f"http://127.0.0.1:{free_port()}/v1", "qwen") is None


def test_the_budget_takes_the_smaller_of_the_reported_context_and_the_setting() -> None:
    settings = Settings().models  # context_window 8192
    assert context_tokens(settings, ModelCapabilities(context_tokens=2048)) == 2048
    assert context_tokens(settings, ModelCapabilities(context_tokens=32768)) == 8192  # raise context_window to use it
    assert context_tokens(settings, ModelCapabilities()) == 8192


@pytest.mark.parametrize("server", [LLAMA_SERVER], indirect=True)
def test_an_openai_model_declares_what_its_server_reports_and_the_prompt_budget_follows(server, tmp_path: Path) -> None:
    base_url, _ = server
    settings = Settings(
        data_dir=tmp_path / "data", chat_model="openai:model.gguf", openai_base_url=base_url, embedder="hashing"
    )
    model = load_chat_model(settings.models)
    assert model.capabilities.context_tokens == 2048 and model.capabilities.prompt_caching
    asyncio.run(model.aclose())
    components = build_components(settings)
    try:
        budget = next(s for s in components.engine.stages if isinstance(s, Budget))
        assert budget.limits.budget == 2048 - settings.answers.answer_max_tokens
    finally:
        asyncio.run(components.aclose())
        components.database.close()
