"""AnthropicChatModel against a local server that speaks the Messages API (tests/messages_server.py)."""

from __future__ import annotations

import sys

import pytest

from anaphora.errors import ConfigurationError, MissingDependencyError, ModelUnavailableError
from anaphora.models import load_chat_model
from anaphora.models.base import ChatOptions
from anaphora.settings import Settings
from anaphora.testing.chat_model_contract import ChatModelContract
from anaphora.types import Message
from tests.messages_server import messages_server

pytest.importorskip("anthropic")
from anaphora.models.anthropic import AnthropicChatModel

pytestmark = pytest.mark.unit

SYSTEM = "Answer from the excerpts. " * 20
HISTORY = [
    Message(role="user", content="How do I install Kestrel?"),
    Message(role="assistant", content="With the Helm chart."),
]


def turn(question: str) -> list[Message]:
    return [Message(role="system", content=SYSTEM), *HISTORY, Message(role="user", content=question)]


@pytest.fixture
def server():
    with messages_server() as state:
        yield state


@pytest.fixture
async def model(server):
    instance = AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=server.base_url, timeout_s=10)
    yield instance
    await instance.aclose()


class TestAnthropicContract(ChatModelContract):
    caches_prompts = True

    @pytest.fixture
    async def model(self, server):
        instance = AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=server.base_url, timeout_s=10)
        yield instance
        await instance.aclose()


async def test_cache_breakpoints_on_the_system_prompt_and_the_history(model, server) -> None:
    await model.chat(turn("And on ARM?"), ChatOptions(max_tokens=50, stop=("\nQuestion:", "\n\n")))
    body = server.requests[-1]
    sent = server.headers[-1]  # the key, in the header this SDK version uses
    assert sent.get("x-api-key") == "sk-ant-test" or sent.get("authorization") == "Bearer sk-ant-test"
    assert body["model"] == "claude-test" and body["max_tokens"] == 50
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    marked = [m["content"][-1].get("cache_control") for m in body["messages"]]
    assert marked == [None, {"type": "ephemeral"}, None]  # the end of the history; the new question is not cached
    assert body["stop_sequences"] == ["\nQuestion:"]  # the API refuses whitespace-only stop sequences


async def test_a_first_turn_marks_only_the_system_prompt(model, server) -> None:
    await model.chat([Message(role="system", content=SYSTEM), Message(role="user", content="Hi?")], ChatOptions())
    body = server.requests[-1]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][0]["content"][0]


async def test_the_next_turn_reads_the_stable_prefix_from_the_cache(model, server) -> None:
    first = await model.chat(turn("And on ARM?"), ChatOptions())
    assert first.usage.cached_tokens == 0 and first.usage.cache_write_tokens > 0
    follow_up = [*turn("And on ARM?")[:-1], Message(role="user", content="And on ARM?")]
    follow_up += [Message(role="assistant", content="Use the arm64 image."), Message(role="user", content="Why?")]
    reply = await model.chat(follow_up, ChatOptions())
    usage = reply.usage
    assert usage.cached_tokens == first.usage.cache_write_tokens  # everything the first turn wrote
    assert usage.prompt_tokens > usage.cached_tokens + usage.cache_write_tokens  # the new question is uncached
    assert reply.text == server.reply


async def test_stream_reads_usage_from_message_start_and_message_delta(model, server) -> None:
    await model.chat(turn("And on ARM?"), ChatOptions())
    stream = model.stream(turn("And on Windows?"), ChatOptions())
    deltas = [d async for d in stream]
    assert "".join(deltas) == server.reply and len(deltas) > 1
    assert server.requests[-1]["stream"] is True
    assert stream.usage.cached_tokens > 0
    assert stream.usage.completion_tokens == (len(server.reply) + 3) // 4  # from message_delta


async def test_json_mode_is_the_structured_output_format(model, server) -> None:
    await model.chat(turn("q"), ChatOptions(json_mode=True, json_schema={"type": "object", "required": ["query"]}))
    body = server.requests[-1]
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": {"type": "object", "required": ["query"]}}
    }
    await model.chat(turn("q"), ChatOptions(json_mode=True))
    assert server.requests[-1]["output_config"]["format"]["schema"] == {"type": "object"}
    await model.chat(turn("q"), ChatOptions())
    assert "output_config" not in server.requests[-1]


async def test_http_errors_are_model_unavailable(model, server) -> None:
    server.status = 529
    with pytest.raises(ModelUnavailableError) as caught:
        await model.chat(turn("q"), ChatOptions())
    assert "529" in caught.value.message and caught.value.hint
    with pytest.raises(ModelUnavailableError):
        _ = [d async for d in model.stream(turn("q"), ChatOptions())]


async def test_an_unreachable_endpoint_is_model_unavailable() -> None:
    model = AnthropicChatModel("claude-test", api_key="k", base_url="http://127.0.0.1:9", timeout_s=2)
    try:
        with pytest.raises(ModelUnavailableError) as caught:
            await model.chat(turn("q"), ChatOptions())
        assert "did not answer" in caught.value.message
    finally:
        await model.aclose()


def test_registry_builds_it_from_settings(server) -> None:
    settings = Settings(chat_model="anthropic:claude-x", anthropic_base_url=server.base_url)
    model = load_chat_model(settings.models)
    assert isinstance(model, AnthropicChatModel) and model.name == "claude-x"
    with pytest.raises(ConfigurationError, match="API key"):
        load_chat_model(Settings(chat_model="anthropic:claude-x").models)  # the public endpoint needs a key
    with pytest.raises(ConfigurationError, match="model name"):
        load_chat_model(Settings(chat_model="anthropic:", anthropic_api_key="k").models)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingDependencyError) as caught:
        AnthropicChatModel("claude-test", api_key="k")
    assert "anaphora[anthropic]" in (caught.value.hint or "")
