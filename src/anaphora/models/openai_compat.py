"""Any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server, Ollama, OpenAI, LM Studio, ...).

Prompt caching is the server's (OpenAI's automatic prefix cache, vLLM's prefix caching); where the server reports it,
``usage.prompt_tokens_details.cached_tokens`` becomes the call's ``cached_tokens``. Streams ask for the usage chunk
(``stream_options.include_usage``), which OpenAI, vLLM, llama.cpp's server and Ollama send after the last delta; a
server that sends none (llama-cpp-python's) gets its stream's usage estimated: one completion token per content
chunk, and the prompt counted as the budget counts it.

Every failure names the server (``base_url``) and says what to change: unreachable, slow (the call's timeout), gone
mid-answer, an HTTP error, or a prompt longer than the server's context.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from anaphora.errors import ModelUnavailableError
from anaphora.models.base import ChatOptions, ChatReply, ChatStream, ModelCapabilities, Usage, approx_tokens
from anaphora.types import Message

MESSAGE_OVERHEAD_TOKENS = 4  # a chat template's role markers around each message (estimates only)


class OpenAICompatibleChatModel:
    """Talks HTTP to ``{base_url}/chat/completions``; streaming uses server-sent events. Servers of this API keep
    a repeated prompt prefix cached (OpenAI bills it at half; vLLM, llama.cpp server and Ollama reuse it).
    ``context_tokens``: the context length the server reported for the model, if it did
    (:func:`anaphora.models.served_context.served_context_tokens`)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str = "",
        timeout_s: float = 120.0,
        context_tokens: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.capabilities = ModelCapabilities(prompt_caching=True, context_tokens=context_tokens)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    def _payload(self, messages: Sequence[Message], options: ChatOptions, stream: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "stream": stream,
        }
        if stream:
            payload["stream_options"] = {"include_usage": True}
        if options.stop:
            payload["stop"] = list(options.stop)
        if options.json_mode and options.json_schema:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": options.json_schema},
            }
        elif options.json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _unavailable(self, exc: Exception) -> ModelUnavailableError:
        """A transport failure, named: a timeout, a refused connection, a server gone mid-answer."""
        if isinstance(exc, httpx.TimeoutException):
            return ModelUnavailableError(
                f"the chat endpoint {self.base_url} did not answer within {self.timeout_s:g} s ({type(exc).__name__})",
                hint="check that the model server is running and not overloaded, or raise ANAPHORA_MODEL_TIMEOUT_S",
            )
        detail = str(exc) or "the connection ended without a reply"
        return ModelUnavailableError(
            f"the chat endpoint {self.base_url} did not answer: {type(exc).__name__}: {detail}",
            hint="start the model server or fix ANAPHORA_OPENAI_BASE_URL / ANAPHORA_OPENAI_API_KEY",
        )

    def _check(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        body = response.text[:300]
        if response.status_code == 400 and exceeds_context(response):
            raise ModelUnavailableError(
                f"the chat endpoint {self.base_url} refused a prompt longer than its context: {body}",
                hint="set ANAPHORA_CONTEXT_WINDOW to the server's context length (llama.cpp: --n_ctx / -c; "
                "vLLM: --max-model-len; Ollama: num_ctx), or start the server with a longer context",
            )
        raise ModelUnavailableError(
            f"the chat endpoint {self.base_url} answered HTTP {response.status_code}: {body}",
            hint="check the model name (ANAPHORA_CHAT_MODEL=openai:NAME) and the API key",
        )

    async def _send(self, payload: dict[str, Any], *, stream: bool) -> httpx.Response:
        """POST ``payload``; once more when the server closed the connection against the protocol, which is what a
        kept-alive connection does when the server dropped it meanwhile (its idle timeout, a restart) at the moment
        the request went out. A server that is really gone fails the second time too, and says so."""
        request = self._client.build_request("POST", "/chat/completions", json=payload)
        try:
            return await self._client.send(request, stream=stream)
        except httpx.RemoteProtocolError:
            return await self._client.send(request, stream=stream)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        try:
            response = await self._send(self._payload(messages, options, False), stream=False)
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc
        self._check(response)
        text = self._parse(response)
        usage = Usage()
        read_usage(response.json().get("usage"), usage)
        return ChatReply(text, usage)

    def _parse(self, response: httpx.Response) -> str:
        try:
            return response.json()["choices"][0]["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelUnavailableError(
                f"the chat endpoint {self.base_url} sent an answer that is not a chat completion",
                hint="check that ANAPHORA_OPENAI_BASE_URL ends in /v1 of an OpenAI-compatible server",
            ) from exc

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return ChatStream(lambda usage: self._stream(messages, options, usage))

    async def _stream(
        self, messages: Sequence[Message], options: ChatOptions, usage: Usage
    ) -> AsyncGenerator[str, None]:
        try:
            response = await self._send(self._payload(messages, options, True), stream=True)
            async with contextlib.aclosing(response):
                if response.status_code >= 400:
                    await response.aread()
                    self._check(response)
                if "text/event-stream" not in response.headers.get("content-type", "text/event-stream"):
                    # a server that ignores stream=true answers with one plain completion
                    await response.aread()
                    text = self._parse(response)
                    read_usage(response.json().get("usage"), usage)
                    if text:
                        yield text
                    return
                chunks = 0
                async with contextlib.aclosing(sse_deltas(response, usage)) as deltas:
                    async for delta in deltas:
                        chunks += 1
                        yield delta
                if not usage.prompt_tokens:  # the server sent no usage chunk
                    estimate_usage(messages, chunks, usage)
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        await self._client.aclose()


async def sse_deltas(response: httpx.Response, usage: Usage) -> AsyncGenerator[str, None]:
    """The content deltas of a chat-completion event stream, up to ``[DONE]``; a usage chunk fills ``usage``."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            chunk = json.loads(data)
            read_usage(chunk.get("usage"), usage)  # the usage chunk has "choices": []
            delta = chunk["choices"][0].get("delta", {}).get("content") if chunk["choices"] else None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
        if delta:
            yield delta


def estimate_usage(messages: Sequence[Message], chunks: int, usage: Usage) -> None:
    """A stream's usage where the server reported none: the prompt at about four characters per token plus each
    message's template markers, and one completion token per content chunk (servers send a token per chunk)."""
    usage.prompt_tokens = sum(approx_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    usage.completion_tokens = usage.completion_tokens or chunks


def exceeds_context(response: httpx.Response) -> bool:
    """Whether an HTTP 400 says the prompt is longer than the model's context: OpenAI's and llama-cpp-python's
    ``context_length_exceeded`` code, vLLM's and llama.cpp's wording."""
    text = response.text.lower()
    return "context_length_exceeded" in text or "context length" in text or "context size" in text


def read_usage(reported: Any, usage: Usage) -> None:
    """Copy an OpenAI ``usage`` object into ``usage``; a missing or malformed one leaves it as it is."""
    if not isinstance(reported, dict):
        return
    details = reported.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    for name, value in (
        ("prompt_tokens", reported.get("prompt_tokens")),
        ("completion_tokens", reported.get("completion_tokens")),
        ("cached_tokens", cached),
    ):
        if isinstance(value, int) and value >= 0:
            setattr(usage, name, value)
