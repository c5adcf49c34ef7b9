"""The chat-model interface every backend implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class ChatModel(Protocol):
    """A chat model.

    Rules every backend keeps:
    - ``chat`` and ``stream`` never mutate ``messages``;
    - a model that cannot be reached or loaded raises :class:`anaphora.errors.ModelError` with a hint;
    - ``stream`` yields text deltas whose concatenation equals what ``chat`` would have returned;
    - ``count_tokens`` uses the model's tokenizer when it has one, else about four characters per token.
    """

    name: str

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply: ...

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> AsyncIterator[str]: ...

    def count_tokens(self, text: str) -> int: ...

    async def aclose(self) -> None:
        """Release what the backend holds (an HTTP client); in-process backends have nothing to release."""
        ...


def approx_tokens(text: str) -> int:
    """About four characters per token: the brief's rule where no tokenizer is available."""
    return max(1, (len(text) + 3) // 4) if text else 0
