"""Anthropic's Messages API (``anthropic:MODEL``), through the official SDK (extra ``anthropic``).

Prompt caching: every request marks two ``cache_control`` breakpoints, the end of the system prompt and the end of
the conversation before the final user message (the summary and verbatim turns). With the ``cache_stable`` prompt
layout both prefixes stay byte-identical from turn to turn, so the next turn reads them from Anthropic's cache
(``cache_read_input_tokens``) and pays full price only for what follows: this turn's excerpts and question. The API
looks a breakpoint's prefix up at earlier block boundaries too, so the history prefix cached on one turn is found on
the next although the breakpoint moved on by a turn. Prompts shorter than the model's minimum cacheable length are
simply not cached.

``usage`` maps ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` to ``prompt_tokens``,
``cache_read_input_tokens`` to ``cached_tokens`` and ``cache_creation_input_tokens`` to ``cache_write_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from anaphora.errors import ModelUnavailableError, require
from anaphora.models.base import ChatOptions, ChatReply, ChatStream, ModelCapabilities, Usage, approx_tokens
from anaphora.types import Message

EPHEMERAL = {"type": "ephemeral"}
DEFAULT_BASE_URL = "https://api.anthropic.com"


def request_body(model: str, messages: Sequence[Message], options: ChatOptions) -> dict[str, Any]:
    """The Messages API request for ``messages``, with the cache breakpoints (system, then the stable history).

    JSON mode is the API's structured output (``output_config.format``). The current Messages API takes no sampling
    temperature, so ``options.temperature`` is not sent."""
    system = [{"type": "text", "text": m.content} for m in messages if m.role == "system" and m.content]
    if system:
        system[-1]["cache_control"] = EPHEMERAL
    turns = [{"role": m.role, "content": [{"type": "text", "text": m.content}]} for m in messages if m.role != "system"]
    if len(turns) > 1:  # the end of the conversation before this turn's message: the stable history prefix
        turns[-2]["content"][-1]["cache_control"] = EPHEMERAL
    body: dict[str, Any] = {"model": model, "max_tokens": options.max_tokens, "messages": turns}
    if system:
        body["system"] = system
    stops = [s for s in options.stop if s.strip()]  # the API refuses blank stop sequences
    if stops:
        body["stop_sequences"] = stops
    if options.json_mode:
        schema = options.json_schema or {"type": "object"}
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    return body


def prompt_usage(input_tokens: int, cache_read: int | None, cache_creation: int | None, usage: Usage) -> None:
    """Fill ``usage`` in from the Messages API's prompt counts (``input_tokens`` excludes the cached parts)."""
    read, written = cache_read or 0, cache_creation or 0
    usage.prompt_tokens = input_tokens + read + written
    usage.cached_tokens = read
    usage.cache_write_tokens = written


class AnthropicChatModel:
    """Claude models over the Messages API (the SDK's own HTTP client; one retry on connection errors and 5xx).
    Prompt caching through ``cache_control`` breakpoints (cached input billed at a tenth)."""

    capabilities = ModelCapabilities(prompt_caching=True)

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout_s: float = 120.0,
    ) -> None:
        sdk = require("anthropic", package="anthropic", extra="anthropic", purpose="the Anthropic chat model")
        self.name = model
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._sdk = sdk
        self._client = sdk.AsyncAnthropic(api_key=api_key, base_url=self.base_url, timeout=timeout_s, max_retries=1)

    def _failure(self, exc: Exception) -> ModelUnavailableError:
        if isinstance(exc, self._sdk.APIStatusError):
            return ModelUnavailableError(
                f"the Anthropic API at {self.base_url} answered HTTP {exc.status_code}: {str(exc)[:300]}",
                hint="check the model name (ANAPHORA_CHAT_MODEL=anthropic:NAME) and ANAPHORA_ANTHROPIC_API_KEY",
            )
        return ModelUnavailableError(
            f"the Anthropic API at {self.base_url} did not answer: {exc}",
            hint="check the network and ANAPHORA_ANTHROPIC_BASE_URL",
        )

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        try:
            message = await self._client.messages.create(**request_body(self.model, messages, options))
        except self._sdk.AnthropicError as exc:
            raise self._failure(exc) from exc
        reported, usage = message.usage, Usage(completion_tokens=message.usage.output_tokens)
        prompt_usage(
            reported.input_tokens, reported.cache_read_input_tokens, reported.cache_creation_input_tokens, usage
        )
        text = "".join(block.text for block in message.content if block.type == "text")
        return ChatReply(text, usage)

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return ChatStream(lambda usage: self._stream(messages, options, usage))

    async def _stream(
        self, messages: Sequence[Message], options: ChatOptions, usage: Usage
    ) -> AsyncGenerator[str, None]:
        """Server-sent events: ``message_start`` (the prompt's usage), ``content_block_delta`` (text),
        ``message_delta`` (the output's usage), ``message_stop``."""
        try:
            events = await self._client.messages.create(**request_body(self.model, messages, options), stream=True)
            async with events:
                async for event in events:
                    if event.type == "message_start":
                        reported = event.message.usage
                        read, written = reported.cache_read_input_tokens, reported.cache_creation_input_tokens
                        prompt_usage(reported.input_tokens, read, written, usage)
                    elif event.type == "message_delta":
                        usage.completion_tokens = event.usage.output_tokens
                    elif event.type == "content_block_delta" and event.delta.type == "text_delta" and event.delta.text:
                        yield event.delta.text
        except self._sdk.AnthropicError as exc:
            raise self._failure(exc) from exc

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        await self._client.close()
