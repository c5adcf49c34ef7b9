"""OpenAICompatibleChatModel against a real HTTP server on 127.0.0.1 (stdlib ThreadingHTTPServer)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from anaphora.errors import ModelError, ModelUnavailableError
from anaphora.models import ChatModel, ChatOptions
from anaphora.models.base import approx_tokens as model_tokens
from anaphora.models.fake import shared_chars
from anaphora.models.openai_compat import OpenAICompatibleChatModel
from anaphora.testing.chat_model_contract import ChatModelContract
from anaphora.types import Message
from tests.local_http import serving

pytestmark = pytest.mark.unit

MESSAGES = [Message(role="system", content="be brief"), Message(role="user", content="What is 2+2?")]


@dataclass
class Recorded:
    path: str
    authorization: str | None
    body: Any


DROP = 0  # a Behaviour status: the server closes the connection without answering


@dataclass
class Behaviour:
    """What the server answers: ``status``, ``content_type`` and either ``body`` (bytes) or SSE ``events``."""

    status: int = 200
    body: bytes | None = None
    events: list[str] | None = None
    content_type: str = "application/json"


def completion(text: str, prompt_tokens: int = 7, completion_tokens: int = 3) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
    ).encode()


def sse_events(deltas: list[str]) -> list[str]:
    events = [json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    events += [json.dumps({"choices": [{"index": 0, "delta": {"content": d}}]}) for d in deltas]
    events.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    events.append("[DONE]")
    return events


@dataclass
class FakeServer:
    base_url: str
    requests: list[Recorded] = field(default_factory=list)
    behaviour: Behaviour | Callable[[dict], Behaviour] = field(default_factory=Behaviour)

    def answer(self, body: Any) -> Behaviour:
        if callable(self.behaviour):
            return self.behaviour(body)
        behaviour = self.behaviour
        if behaviour.body is None and behaviour.events is None and behaviour.status != DROP:
            return default_answer(body)
        return behaviour


def default_answer(body: Any) -> Behaviour:
    """A completion, or a stream when one is asked for."""
    if isinstance(body, dict) and body.get("stream"):
        return Behaviour(events=sse_events(["Four", " is", " the", " answer."]), content_type="text/event-stream")
    return Behaviour(body=completion("Four."))


def _make_handler(server_state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # close after each response: the SSE body ends with the connection

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            server_state.requests.append(Recorded(self.path, self.headers.get("Authorization"), body))
            if self.path != "/v1/chat/completions":
                self._send(Behaviour(status=404, body=b'{"error": "not found"}'))
                return
            self._send(server_state.answer(body))

        def _send(self, behaviour: Behaviour) -> None:
            if behaviour.status == DROP:  # close the connection without a word
                self.close_connection = True
                return
            self.send_response(behaviour.status)
            self.send_header("Content-Type", behaviour.content_type)
            if behaviour.events is not None:
                self.end_headers()
                for event in behaviour.events:
                    self.wfile.write(f"data: {event}\n\n".encode())
                    self.wfile.flush()
                return
            payload = behaviour.body or b""
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # the client gave up (timeout test): expected
            return
        super().handle_error(request, client_address)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    state = FakeServer(base_url="")
    with serving(_QuietServer(("127.0.0.1", 0), _make_handler(state))) as base_url:
        state.base_url = f"{base_url}/v1"
        yield state


@pytest.fixture
async def make_model():
    created: list[OpenAICompatibleChatModel] = []

    def factory(base_url: str, model: str = "test-model", **kwargs: Any) -> OpenAICompatibleChatModel:
        kwargs.setdefault("timeout_s", 10.0)
        instance = OpenAICompatibleChatModel(model, base_url=base_url, **kwargs)
        created.append(instance)
        return instance

    yield factory
    for instance in created:
        await instance.aclose()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- payloads and headers ----------------------------------------------------------------------------------


async def test_is_a_chat_model(make_model, server) -> None:
    model = make_model(server.base_url)
    assert isinstance(model, ChatModel)
    assert model.name == "test-model"
    assert model.count_tokens("abcdefgh") == 2


async def test_chat_posts_payload_and_parses_reply(make_model, server) -> None:
    model = make_model(server.base_url, model="qwen-7b")
    reply = await model.chat(MESSAGES, ChatOptions(temperature=0.3, max_tokens=42))

    assert reply.text == "Four."
    assert (reply.prompt_tokens, reply.completion_tokens) == (7, 3)
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "qwen-7b",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "What is 2+2?"},
        ],
        "temperature": 0.3,
        "max_tokens": 42,
        "stream": False,
    }
    assert "stop" not in request.body and "response_format" not in request.body


async def test_chat_sends_stop_and_json_mode(make_model, server) -> None:
    model = make_model(server.base_url)
    await model.chat(MESSAGES, ChatOptions(stop=("\n\n", "END"), json_mode=True))
    body = server.requests[0].body
    assert body["stop"] == ["\n\n", "END"]
    assert body["response_format"] == {"type": "json_object"}


async def test_trailing_slash_in_base_url_is_ignored(make_model, server) -> None:
    model = make_model(server.base_url + "/")
    assert (await model.chat(MESSAGES, ChatOptions())).text == "Four."
    assert server.requests[0].path == "/v1/chat/completions"


async def test_bearer_header_sent_when_api_key_set(make_model, server) -> None:
    await make_model(server.base_url, api_key="sk-secret").chat(MESSAGES, ChatOptions())
    assert server.requests[0].authorization == "Bearer sk-secret"


async def test_no_authorization_header_without_api_key(make_model, server) -> None:
    await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert server.requests[0].authorization is None


async def test_null_content_becomes_empty_text(make_model, server) -> None:
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": None}}]}).encode()
    server.behaviour = Behaviour(body=body)
    reply = await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert reply.text == ""
    assert (reply.prompt_tokens, reply.completion_tokens) == (0, 0)


async def test_messages_are_not_mutated(make_model, server) -> None:
    messages = [m.model_copy() for m in MESSAGES]
    model = make_model(server.base_url)
    await model.chat(messages, ChatOptions())
    _ = [p async for p in model.stream(messages, ChatOptions())]
    assert messages == MESSAGES


# --- streaming ----------------------------------------------------------------------------------------------


async def test_stream_reassembles_sse_deltas(make_model, server) -> None:
    deltas = ["Hel", "lo", ", ", "wor", "ld", "!\n", "  done"]
    server.behaviour = Behaviour(events=sse_events(deltas), content_type="text/event-stream")
    model = make_model(server.base_url, api_key="k")
    opts = ChatOptions(temperature=0.1, max_tokens=9, stop=("X",), json_mode=True)
    pieces = [p async for p in model.stream(MESSAGES, opts)]

    assert pieces == deltas
    assert "".join(pieces) == "Hello, world!\n  done"
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.1 and body["max_tokens"] == 9
    assert body["stop"] == ["X"] and body["response_format"] == {"type": "json_object"}
    assert server.requests[0].authorization == "Bearer k"


async def test_stream_stops_at_done_and_skips_junk(make_model, server) -> None:
    events = [
        json.dumps({"choices": [{"delta": {"content": "a"}}]}),
        "not json at all",
        json.dumps({"choices": []}),  # e.g. a usage-only chunk
        json.dumps({"choices": [{"delta": {"content": "b"}}]}),
        "[DONE]",
        json.dumps({"choices": [{"delta": {"content": "after done"}}]}),
    ]
    server.behaviour = Behaviour(events=events, content_type="text/event-stream")
    pieces = [p async for p in make_model(server.base_url).stream(MESSAGES, ChatOptions())]
    assert "".join(pieces) == "ab"


async def test_stream_and_chat_agree(make_model, server) -> None:
    text = "The answer is four [math#1]."

    def behave(body: dict) -> Behaviour:
        if body["stream"]:
            chunks = [text[i : i + 5] for i in range(0, len(text), 5)]
            return Behaviour(events=sse_events(chunks), content_type="text/event-stream")
        return Behaviour(body=completion(text))

    server.behaviour = behave
    model = make_model(server.base_url)
    streamed = "".join([p async for p in model.stream(MESSAGES, ChatOptions())])
    assert streamed == (await model.chat(MESSAGES, ChatOptions())).text == text


async def test_stream_with_non_sse_answer_is_not_silently_empty(make_model, server) -> None:
    server.behaviour = Behaviour(body=completion("Four."))  # a server that does not stream
    model = make_model(server.base_url)
    try:
        text = "".join([p async for p in model.stream(MESSAGES, ChatOptions())])
    except ModelUnavailableError:
        return
    assert text == "Four."


# --- failures -----------------------------------------------------------------------------------------------


async def test_http_500_raises_model_unavailable_with_hint(make_model, server) -> None:
    server.behaviour = Behaviour(status=500, body=b'{"error": "kaboom inside"}')
    model = make_model(server.base_url)
    with pytest.raises(ModelUnavailableError) as info:
        await model.chat(MESSAGES, ChatOptions())
    assert "500" in info.value.message
    assert "kaboom inside" in info.value.message
    assert info.value.hint and "ANAPHORA_CHAT_MODEL" in info.value.hint


async def test_stream_http_500_raises_model_unavailable(make_model, server) -> None:
    server.behaviour = Behaviour(status=500, body=b"overloaded")
    model = make_model(server.base_url)
    with pytest.raises(ModelUnavailableError) as info:
        _ = [p async for p in model.stream(MESSAGES, ChatOptions())]
    assert "500" in info.value.message and "overloaded" in info.value.message
    assert info.value.hint


async def test_http_401_is_model_unavailable(make_model, server) -> None:
    server.behaviour = Behaviour(status=401, body=b'{"error": "bad key"}')
    with pytest.raises(ModelUnavailableError, match="401"):
        await make_model(server.base_url, api_key="wrong").chat(MESSAGES, ChatOptions())


async def test_wrong_base_url_path_is_model_unavailable(make_model, server) -> None:
    root = server.base_url.removesuffix("/v1")  # forgot the /v1: the server answers 404
    with pytest.raises(ModelUnavailableError, match="404"):
        await make_model(root).chat(MESSAGES, ChatOptions())
    assert server.requests[0].path == "/chat/completions"


@pytest.mark.parametrize(
    "body",
    [
        b'{"hello": "world"}',
        b'{"choices": []}',
        b'{"choices": [{"text": "legacy completion"}]}',
        b"<html>a web page</html>",
        b"",
    ],
    ids=["other-object", "empty-choices", "no-message", "html", "empty"],
)
async def test_non_chat_completion_body_raises_model_unavailable(make_model, server, body: bytes) -> None:
    server.behaviour = Behaviour(body=body)
    with pytest.raises(ModelUnavailableError) as info:
        await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert "not a chat completion" in info.value.message
    assert info.value.hint and "ANAPHORA_OPENAI_BASE_URL" in info.value.hint


@pytest.mark.parametrize(
    "body",
    [b"[]", b'"just a string"', b'{"choices": null}', b'{"choices": [{"message": null}]}'],
    ids=["list", "string", "null-choices", "null-message"],
)
async def test_non_object_json_body_raises_model_unavailable(make_model, server, body: bytes) -> None:
    server.behaviour = Behaviour(body=body)
    with pytest.raises(ModelUnavailableError):
        await make_model(server.base_url).chat(MESSAGES, ChatOptions())


async def test_connection_refused_raises_model_unavailable_with_base_url_hint(make_model) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    model = make_model(base_url)
    with pytest.raises(ModelUnavailableError) as info:
        await model.chat(MESSAGES, ChatOptions())
    assert isinstance(info.value, ModelError)
    assert base_url in info.value.message
    assert "ANAPHORA_OPENAI_BASE_URL" in info.value.hint
    assert "ANAPHORA_OPENAI_BASE_URL" in str(info.value)


async def test_stream_connection_refused_raises_model_unavailable(make_model) -> None:
    model = make_model(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ModelUnavailableError) as info:
        _ = [p async for p in model.stream(MESSAGES, ChatOptions())]
    assert "ANAPHORA_OPENAI_BASE_URL" in info.value.hint


async def test_timeout_raises_model_unavailable(make_model, server) -> None:
    release = threading.Event()

    def slow(body: dict) -> Behaviour:
        release.wait(2.0)
        return Behaviour(body=completion("late"))

    server.behaviour = slow
    model = make_model(server.base_url, timeout_s=0.2)
    try:
        with pytest.raises(ModelUnavailableError) as info:
            await model.chat(MESSAGES, ChatOptions())
    finally:
        release.set()
    assert f"{server.base_url} did not answer within 0.2 s (ReadTimeout)" in info.value.message
    assert "ANAPHORA_MODEL_TIMEOUT_S" in info.value.hint


# --- provider prompt caches: usage.prompt_tokens_details.cached_tokens -----------------------------------------------


class CachingServer:
    """Answers like a server with a prefix cache (OpenAI, vLLM): ``cached_tokens`` is the shared prefix, in
    four-character tokens, of this prompt and an earlier one; streams end with a usage chunk when asked."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, body: dict) -> Behaviour:
        prompt = "".join(f"{m['role']}:{m['content']}\n" for m in body["messages"])
        shared = max((shared_chars(prompt, earlier) for earlier in self.prompts), default=0)
        self.prompts.append(prompt)
        usage = {
            "prompt_tokens": (len(prompt) + 3) // 4,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": shared // 4},
        }
        if not body.get("stream"):
            payload = json.loads(completion("Four is the answer."))
            return Behaviour(body=json.dumps({**payload, "usage": usage}).encode())
        events = sse_events(["Four", " is", " the", " answer."])
        if body.get("stream_options", {}).get("include_usage"):
            events.insert(-1, json.dumps({"choices": [], "usage": usage}))
        return Behaviour(events=events, content_type="text/event-stream")


class TestOpenAICompatibleContract(ChatModelContract):
    caches_prompts = True

    @pytest.fixture
    async def model(self, server):
        server.behaviour = CachingServer()
        instance = OpenAICompatibleChatModel("test-model", base_url=server.base_url, timeout_s=10)
        yield instance
        await instance.aclose()


async def test_cached_tokens_are_read_from_replies_and_the_usage_chunk(make_model, server) -> None:
    server.behaviour = CachingServer()
    model = make_model(server.base_url)
    long = [Message(role="system", content="be brief " * 40), Message(role="user", content="What is 2+2?")]
    first = await model.chat(long, ChatOptions())
    assert first.usage.cached_tokens == 0 and first.usage.prompt_tokens > 0
    again = await model.chat(long, ChatOptions())
    assert 0 < again.usage.cached_tokens <= again.usage.prompt_tokens
    stream = model.stream(long, ChatOptions())
    assert "".join([d async for d in stream]) == "Four is the answer."
    assert server.requests[-1].body["stream_options"] == {"include_usage": True}
    assert stream.usage.cached_tokens == again.usage.cached_tokens
    assert (stream.usage.prompt_tokens, stream.usage.completion_tokens) == (again.usage.prompt_tokens, 4)


async def test_a_server_without_usage_details_reports_no_cached_tokens(make_model, server) -> None:
    reply = await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert reply.usage.cached_tokens == 0 and reply.usage.prompt_tokens == 7


# --- what a real server does: context limits, timeouts, dropped connections, streams without usage ------------------


@pytest.mark.parametrize(
    "body",
    [
        # llama-cpp-python's server (OpenAI's wording and code)
        b'{"error": {"message": "This model\'s maximum context length is 2048 tokens. However, you requested 3135 '
        b'tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}',
        # llama.cpp's server
        b'{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", '
        b'"type": "exceed_context_size_error"}}',
    ],
    ids=["openai-style", "llama-server"],
)
async def test_a_prompt_over_the_servers_context_says_which_setting_to_change(make_model, server, body) -> None:
    server.behaviour = Behaviour(status=400, body=body)
    with pytest.raises(ModelUnavailableError) as info:
        await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert server.base_url in info.value.message and "longer than its context" in info.value.message
    assert "ANAPHORA_CONTEXT_WINDOW" in info.value.hint


@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
async def test_a_connection_dropped_before_the_answer_is_tried_once_more(make_model, server, streamed) -> None:
    """What a kept-alive connection looks like when the server dropped it as the request went out."""
    answers = iter([Behaviour(status=DROP)])

    def once_dropped(body: dict) -> Behaviour:
        return next(answers, None) or default_answer(body)

    server.behaviour = once_dropped
    model = make_model(server.base_url)
    if streamed:
        text = "".join([d async for d in model.stream(MESSAGES, ChatOptions())])
    else:
        text = (await model.chat(MESSAGES, ChatOptions())).text
    assert text in ("Four.", "Four is the answer.") and len(server.requests) == 2


async def test_a_server_that_drops_every_connection_is_named(make_model, server) -> None:
    server.behaviour = Behaviour(status=DROP)
    with pytest.raises(ModelUnavailableError) as info:
        await make_model(server.base_url).chat(MESSAGES, ChatOptions())
    assert f"{server.base_url} did not answer: RemoteProtocolError" in info.value.message
    assert len(server.requests) == 2  # once more, not forever


async def test_a_stream_without_a_usage_chunk_gets_its_usage_estimated(make_model, server) -> None:
    """llama-cpp-python's server ignores stream_options: a token per chunk, the prompt at four characters a token."""
    deltas = ["Four", " is", " the", " answer."]
    server.behaviour = Behaviour(events=sse_events(deltas), content_type="text/event-stream")
    stream = make_model(server.base_url).stream(MESSAGES, ChatOptions())
    assert "".join([d async for d in stream]) == "Four is the answer."
    assert stream.usage.completion_tokens == 4
    assert stream.usage.prompt_tokens == sum(model_tokens(m.content) + 4 for m in MESSAGES)
