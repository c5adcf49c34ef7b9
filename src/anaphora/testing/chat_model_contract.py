"""The contract every :class:`~anaphora.models.base.ChatModel` must honour, as a pytest suite to subclass.

A backend's test module subclasses :class:`ChatModelContract` and provides a ``model`` fixture: a ready model,
closed afterwards, that answers deterministically at temperature 0::

    class TestMyModel(ChatModelContract):
        caches_prompts = True  # the backend reports prompt tokens served from a cache

        @pytest.fixture
        async def model(self):
            model = MyChatModel(...)
            yield model
            await model.aclose()

Rules: ``chat`` returns text and a usage whose counts are not negative and whose cached part never exceeds the
prompt; ``stream`` yields deltas that add up to what ``chat`` returns, and its usage counts the same prompt; neither
mutates the messages; a stream closed early leaves the model usable; ``count_tokens`` counts nothing as 0 and more
text as no fewer tokens. A backend with ``caches_prompts`` reports, on a call whose prompt repeats an earlier call's
up to its last message, part (not all) of the prompt as cached. A backend whose server reports no usage for a
stream (``reports_stream_usage = False``: llama-cpp-python's server) estimates it: the stream's prompt count is then
within a factor of 2 of the one ``chat`` reports, and it counts a completion token per delta.
"""

from __future__ import annotations

import pytest

from anaphora.models.base import ChatModel, ChatOptions, Usage
from anaphora.types import Message

SYSTEM = (
    "You answer questions about the Kestrel agent from the excerpts. Be brief and cite the excerpt ids. "
    "Kestrel runs as a DaemonSet on Kubernetes, as a systemd unit on Linux and as a service on Windows. "
) * 4
CONVERSATION = [
    Message(role="system", content=SYSTEM),
    Message(role="user", content="How do I install Kestrel on Kubernetes?"),
    Message(role="assistant", content="Install it with the Helm chart: helm install kestrel kestrel/kestrel."),
]
OPTIONS = ChatOptions(temperature=0.0, max_tokens=24)


def asking(question: str) -> list[Message]:
    return [*CONVERSATION, Message(role="user", content=question)]


def check_usage(usage: Usage) -> None:
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens)
    assert all(isinstance(n, int) and n >= 0 for n in counts), usage
    assert usage.cached_tokens <= usage.prompt_tokens, usage


class ChatModelContract:
    caches_prompts: bool = False
    reports_stream_usage: bool = True

    @pytest.fixture
    def model(self) -> ChatModel:  # pragma: no cover - overridden
        raise NotImplementedError("a ChatModelContract subclass must provide a `model` fixture")

    def test_is_a_chat_model(self, model) -> None:
        assert isinstance(model, ChatModel)
        assert isinstance(model.name, str) and model.name

    async def test_chat_returns_text_and_usage(self, model) -> None:
        reply = await model.chat(asking("And on ARM?"), OPTIONS)
        assert isinstance(reply.text, str)
        check_usage(reply.usage)

    async def test_stream_adds_up_to_chat(self, model) -> None:
        messages = asking("Which Helm chart version ships Kestrel 3.4.1?")
        reply = await model.chat(messages, OPTIONS)
        stream = model.stream(messages, OPTIONS)
        deltas = [delta async for delta in stream]
        assert all(isinstance(d, str) and d for d in deltas)
        assert "".join(deltas) == reply.text
        check_usage(stream.usage)
        if self.reports_stream_usage:
            assert stream.usage.prompt_tokens == reply.usage.prompt_tokens
        else:  # estimated
            assert reply.usage.prompt_tokens / 2 <= stream.usage.prompt_tokens <= reply.usage.prompt_tokens * 2
            assert stream.usage.completion_tokens == len(deltas)

    async def test_messages_are_not_mutated(self, model) -> None:
        messages = asking("What memory limit does the agent need?")
        before = [m.model_copy() for m in messages]
        await model.chat(messages, OPTIONS)
        _ = [delta async for delta in model.stream(messages, OPTIONS)]
        assert messages == before

    async def test_a_stream_closed_early_leaves_the_model_usable(self, model) -> None:
        stream = model.stream(asking("How do I upgrade Kestrel?"), ChatOptions(temperature=0.0, max_tokens=64))
        async for _delta in stream:
            break
        await stream.aclose()
        reply = await model.chat(asking("And on ARM?"), OPTIONS)
        assert isinstance(reply.text, str)

    def test_count_tokens(self, model) -> None:
        assert model.count_tokens("") == 0
        short = model.count_tokens("Kestrel")
        assert short > 0
        assert model.count_tokens("Kestrel runs as a DaemonSet on every node of the cluster.") >= short

    async def test_a_repeated_prefix_is_served_from_the_cache(self, model) -> None:
        if not self.caches_prompts:
            pytest.skip("this backend reports no prompt cache")
        await model.chat(asking("What memory limit does the agent need?"), OPTIONS)
        reply = await model.chat(asking("And the disk buffer?"), OPTIONS)
        check_usage(reply.usage)
        assert 0 < reply.usage.cached_tokens < reply.usage.prompt_tokens
