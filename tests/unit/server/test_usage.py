"""The ``usage`` of Chat Completions and Responses is what the chat model's server reported for the answer call
(prompt, completion and cached tokens), through the official openai client; a turn answered without a call (quoted
from the passages) reports the budget's count of its prompt and the answer counted with the model's tokenizer."""

from __future__ import annotations

import openai
import pytest

from anaphora import FakeChatModel
from anaphora.models.base import ChatOptions, ChatReply, Usage
from tests.server_harness import components_for, serve, settings_for, token

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"
REPORTED = Usage(prompt_tokens=1234, completion_tokens=56, cached_tokens=1000)


class ReportingModel(FakeChatModel):
    """Answers like the fake model, with the usage a server reported (unlike any count made here)."""

    async def chat(self, messages, options: ChatOptions) -> ChatReply:
        reply = await super().chat(messages, options)
        return ChatReply(reply.text, Usage(**{name: getattr(REPORTED, name) for name in Usage.__slots__}))


@pytest.mark.parametrize("mode", ["generate", "extractive"])
def test_usage_is_the_servers_report_of_the_answer_call(tmp_path, mode: str) -> None:
    settings = settings_for(tmp_path, answer_mode=mode)
    with (
        serve(settings, components_for(settings, ReportingModel())) as running,
        openai.OpenAI(base_url=f"{running.url}/v1", api_key=token(), max_retries=0, timeout=30) as client,
    ):
        completion = client.chat.completions.create(model="anaphora", messages=[{"role": "user", "content": QUESTION}])
        response = client.responses.create(model="anaphora", input=QUESTION)
    answer = response.output_text
    if mode == "generate":
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1234, 56)
        assert (response.usage.input_tokens, response.usage.output_tokens) == (1234, 56)
        assert response.usage.input_tokens_details.cached_tokens == 1000
    else:  # no model call: the budget's count and the answer's
        trace = (response.model_extra or {})["anaphora"]["trace"]
        assert trace["calls"] == [] and response.usage.input_tokens == trace["prompt_tokens"] > 0
        assert response.usage.output_tokens == running.components.chat_model.count_tokens(answer) > 0
        assert response.usage.input_tokens_details.cached_tokens == 0
