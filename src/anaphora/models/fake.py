"""A scripted chat model for tests: shipped in the package so applications can test with it too."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass

from anaphora.models.base import ChatOptions, ChatReply, ChatStream, ModelCapabilities, Usage, approx_tokens
from anaphora.types import SHOWN_ABOVE, Message

Reply = str | BaseException | Callable[[Sequence[Message]], str]
_CONTEXT_ID = re.compile(r"^\[([^\]\n]+)\]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    messages: tuple[Message, ...]
    options: ChatOptions

    @property
    def prompt(self) -> str:
        return "\n".join(f"{m.role}: {m.content}" for m in self.messages)


def echo_first_context(messages: Sequence[Message]) -> str:
    """Default reply: quote the first line of the question's first excerpt and cite it (one that an earlier turn
    of the prompt shows, and the question only names, is quoted from there); else a fixed line."""
    last = messages[-1].content if messages else ""
    match = _CONTEXT_ID.search(last)
    if match and last[match.end() :].startswith(f" {SHOWN_ABOVE}"):
        label = re.compile(rf"^\[({re.escape(match.group(1))})\](?! {re.escape(SHOWN_ABOVE)})", re.MULTILINE)
        found = ((m.content, hit) for m in messages[:-1] if (hit := label.search(m.content)))
        last, match = next(found, (last, match))
    if not match:
        return "I have no documents about that."
    body = last[match.end() :].splitlines()[1:]  # the rest of the label line is its "(source — heading)"
    first_line = next((line.strip() for line in body if line.strip()), "")
    if len(first_line) > 160:  # cut between words, as a model quoting would, never inside a token
        first_line = first_line[:160].rsplit(" ", 1)[0]
    return f"{first_line} [{match.group(1)}]"


def shared_chars(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # binary search on prefix equality (slices compare in C)
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


FAKE_CAPABILITIES = ModelCapabilities(extracts_facts=False)


class FakeChatModel:
    """Replays scripted replies and records every call.

    ``enqueue`` adds replies: a string is returned, an exception is raised, a callable gets the messages. When the
    queue is empty ``default`` answers (by default, a deterministic echo of the first retrieved excerpt, citing
    it, so the whole pipeline can run without a model). ``delay_s`` simulates latency before a reply;
    ``token_delay_s`` paces a streamed reply, a pause before each word, like a model generating it (the chat model
    spec ``fake:SECONDS`` sets it, so a service started from settings can have slow turns, e.g. for crash tests).

    Usage is reported like a server with a prompt cache that keeps every earlier prompt: ``cached_tokens`` are the
    tokens of the longest prefix this call's messages share with an earlier call's.
    """

    name = "fake"

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        default: Reply = echo_first_context,
        delay_s: float = 0.0,
        token_delay_s: float = 0.0,
        capabilities: ModelCapabilities = FAKE_CAPABILITIES,
    ) -> None:
        """``capabilities``: what it declares (by default a model behind an API with no prefix cache, that is not
        asked for memory facts, which would take scripted replies); tests of capability defaults pass others."""
        self.capabilities = capabilities
        self._queue: deque[Reply] = deque(replies)
        self.default = default
        self.delay_s = delay_s
        self.token_delay_s = token_delay_s
        self.calls: list[RecordedCall] = []

    def enqueue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    @property
    def history(self) -> list[list[Message]]:
        """The messages of every call, oldest first."""
        return [list(call.messages) for call in self.calls]

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        self.calls.append(RecordedCall(tuple(m.model_copy() for m in messages), options))
        reply = self._queue.popleft() if self._queue else self.default
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if isinstance(reply, BaseException):
            raise reply
        text = reply(messages) if callable(reply) else reply
        prompt_tokens = sum(self.count_tokens(m.content) for m in messages)
        usage = Usage(prompt_tokens, self.count_tokens(text), self._cached_tokens(prompt_tokens))
        return ChatReply(text, usage)

    def _cached_tokens(self, prompt_tokens: int) -> int:
        """Tokens of the longest prefix the newest call's messages share with an earlier call's: whole equal
        messages, then the shared start of the first one that differs."""
        *earlier, newest = [call.messages for call in self.calls]
        return min(prompt_tokens, max((self._shared_tokens(newest, e) for e in earlier), default=0))

    def _shared_tokens(self, messages: Sequence[Message], earlier: Sequence[Message]) -> int:
        shared = 0
        for now, before in zip(messages, earlier, strict=False):
            if now.role != before.role:
                break
            if now.content != before.content:
                return shared + self.count_tokens(now.content[: shared_chars(now.content, before.content)])
            shared += self.count_tokens(now.content)
        return shared

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return ChatStream(lambda usage: self._stream(messages, options, usage))

    async def _stream(
        self, messages: Sequence[Message], options: ChatOptions, usage: Usage
    ) -> AsyncGenerator[str, None]:
        reply = await self.chat(messages, options)
        usage.prompt_tokens, usage.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        usage.cached_tokens = reply.usage.cached_tokens
        for piece in re.findall(r"\S+\s*|\s+", reply.text):
            if self.token_delay_s:
                await asyncio.sleep(self.token_delay_s)
            yield piece

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    async def aclose(self) -> None:
        return None  # nothing to release
