"""Any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server, Ollama, OpenAI, LM Studio, ...).

Prompt caching is the server's (OpenAI's automatic prefix cache, vLLM's prefix caching); where the server reports it,
``usage.prompt_tokens_details.cached_tokens`` becomes the call's ``cached_tokens``. Streams ask for the usage chunk
(``stream_options.include_usage``), which OpenAI, vLLM, llama.cpp's server and Ollama send after the last delta.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from anaphora.errors import ModelUnavailableError
from anaphora.models.base import ChatOptions, ChatReply, ChatStream, ModelCapabilities, Usage, approx_tokens
from anaphora.types import Message


class OpenAICompatibleChatModel:
    """Talks HTTP to ``{base_url}/chat/completions``; streaming uses server-sent events. Servers of this API keep
    a repeated prompt prefix cached (OpenAI bills it at half; vLLM, llama.cpp server and Ollama reuse it)."""

    capabilities = ModelCapabilities(prompt_caching=True)

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str = "",
        timeout_s: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model
        self.model = model
        self.base_url = base_url.rstrip("/")
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
        return ModelUnavailableError(
            f"the chat endpoint {self.base_url} did not answer: {exc}",
            hint="start the model server or fix ANAPHORA_OPENAI_BASE_URL / ANAPHORA_OPENAI_API_KEY",
        )

    def _check(self, response: httpx.Response) -> None:
        if response.status_code >= 400:
            body = response.text[:300]
            raise ModelUnavailableError(
                f"the chat endpoint {self.base_url} answered HTTP {response.status_code}: {body}",
                hint="check the model name (ANAPHORA_CHAT_MODEL=openai:NAME) and the API key",
            )

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        try:
            response = await self._client.post("/chat/completions", json=self._payload(messages, options, False))
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
        payload = self._payload(messages, options, True)
        try:
            async with self._client.stream("POST", "/chat/completions", json=payload) as response:
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
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                        read_usage(chunk.get("usage"), usage)  # the usage chunk has "choices": []
                        delta = chunk["choices"][0].get("delta", {}).get("content") if chunk["choices"] else None
                    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                        continue
                    if delta:
                        yield delta
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        await self._client.aclose()


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
