"""The chat-model interface every backend implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from anaphora.types import Message


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Per-call generation options. ``json_mode`` asks the backend to constrain output to a JSON object, and to
    ``json_schema`` when one is given (grammar-constrained in llama.cpp, structured outputs over HTTP)."""

    temperature: float = 0.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    json_mode: bool = False
    json_schema: dict | None = None


@dataclass(slots=True)
class Usage:
    """What one call cost, as the backend reports it. ``cached_tokens``: prompt tokens served from a cache (the
    llama.cpp KV cache, a provider's prefix cache) instead of being evaluated; ``cache_write_tokens``: prompt tokens
    written to a provider's cache (Anthropic bills them apart). Zero where the backend does not know."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    usage: Usage = field(default_factory=Usage)

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.usage.completion_tokens


class ChatStream:
    """The text deltas of one streamed call, to iterate once. The backend fills ``usage`` in as the call reports
    it; it is complete once the deltas are exhausted."""

    def __init__(self, deltas: Callable[[Usage], AsyncGenerator[str, None]]) -> None:
        """``deltas`` makes the delta generator, given the :class:`Usage` it is to fill in."""
        self.usage = Usage()
        self._deltas = deltas(self.usage)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._deltas

    async def aclose(self) -> None:
        """Stop the call early (the consumer is done); the backend frees what it holds."""
        await self._deltas.aclose()


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What a chat model can do, declared by its backend (never guessed from its name); the defaults that depend
    on the model (answer mode, history excerpts, the verbatim window, model-written memory facts) are read from it.

    ``in_process``: it computes every prompt token in this process (llama.cpp), so a longer prompt is slower even
    when cached; ``reliable_answers``: it answers well enough to be asked (a 135M model is not: its turns are quoted
    from the passages); ``extracts_facts``: it may be asked to write memory facts (not a scripted fake);
    ``context_tokens``: its context length, where the backend knows it; ``prompt_caching``: a provider keeps a
    repeated prompt prefix cached (billed or served cheaper), so a prompt that grows only at its end pays off."""

    in_process: bool = False
    reliable_answers: bool = True
    extracts_facts: bool = True
    context_tokens: int | None = None
    prompt_caching: bool = False


@runtime_checkable
class ChatModel(Protocol):
    """A chat model.

    Rules every backend keeps:
    - ``chat`` and ``stream`` never mutate ``messages``;
    - a model that cannot be reached or loaded raises :class:`anaphora.errors.ModelError` with a hint;
    - ``stream`` returns a :class:`ChatStream` of text deltas whose concatenation equals what ``chat`` would have
      returned; its ``usage``, like a reply's, says how many prompt tokens a cache served (0 where unknown);
    - ``count_tokens`` uses the model's tokenizer when it has one, else about four characters per token.
    """

    name: str
    capabilities: ModelCapabilities

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply: ...

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream: ...

    def count_tokens(self, text: str) -> int: ...

    async def aclose(self) -> None:
        """Release what the backend holds (an HTTP client); in-process backends have nothing to release."""
        ...


def approx_tokens(text: str) -> int:
    """About four characters per token: the brief's rule where no tokenizer is available."""
    return max(1, (len(text) + 3) // 4) if text else 0
