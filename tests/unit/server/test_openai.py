"""POST /v1/chat/completions through the official openai client, against a real uvicorn server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest

from anaphora import FakeChatModel, ModelUnavailableError
from anaphora.models.base import ChatStream
from anaphora.models.fake import echo_first_context
from anaphora.pipeline.query import QueryPlan
from anaphora.pipeline.stages import QueryPlanner
from tests.server_harness import components_for, serve, settings_for, token

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"
REWRITE = "kestrel zzqqx helm daemonset arm64"


@pytest.fixture
def running(tmp_path, fake_model):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, fake_model)) as server:
        yield server


@contextmanager
def client(running, api_key: str | None = None) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{running.url}/v1", api_key=api_key or token("alice"), max_retries=0, timeout=30
    ) as openai_client:
        yield openai_client


def extension(obj) -> dict:
    return (obj.model_extra or {})["anaphora"]


def test_openai_client_version_is_a_real_one() -> None:
    assert int(openai.__version__.split(".")[0]) >= 1


def test_non_streaming_completion_has_openai_shape_and_extension(running, fake_model) -> None:
    with client(running) as openai_client:
        reply = openai_client.chat.completions.create(
            model="anaphora", messages=[{"role": "user", "content": QUESTION}]
        )
    assert reply.object == "chat.completion"
    assert reply.id.startswith("chatcmpl-") and reply.model == "anaphora" and reply.created > 0
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    details = extension(reply)
    assert details["citations"] and details["citations"][0]["source"]
    assert details["trace"]["question"] == QUESTION and details["trace"]["retrieved"]
    assert "conversation_id" not in details  # stateless: nothing stored
    # the text is the model's answer as it wrote it (with its own [id] markers): no sources list, no trace
    assert choice.message.content == echo_first_context(fake_model.history[-1]).strip()


def test_streaming_text_equals_the_final_answer_and_metadata_rides_the_extension(running) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    with client(running) as openai_client:
        expected = openai_client.chat.completions.create(model="m", messages=messages)
        chunks = list(openai_client.chat.completions.create(model="m", messages=messages, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens > 0
    details = extension(last)
    assert details["citations"] == extension(expected)["citations"]
    assert details["trace"]["question"] == QUESTION
    assert all("anaphora" not in (c.model_extra or {}) for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_the_retrieval_rewrite_never_reaches_the_answer_text(running) -> None:
    class Rewrites:
        calls_model = False

        async def run(self, question, history):
            return QueryPlan(query=REWRITE, source="rewrite", status="ok")

    running.components.engine.replace_stage(QueryPlanner(Rewrites()))
    messages = [{"role": "user", "content": "and on ARM?"}]
    with client(running) as openai_client:
        chunks = list(openai_client.chat.completions.create(model="m", messages=messages, stream=True))
        reply = openai_client.chat.completions.create(model="m", messages=messages)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and REWRITE not in text
    assert extension(chunks[-1])["trace"]["query"] == REWRITE  # it is in the trace, where it belongs
    assert REWRITE not in reply.choices[0].message.content


def test_stateless_history_is_used_whole_and_system_messages_are_not(running, fake_model) -> None:
    messages = [
        {"role": "system", "content": "IGNORED SYSTEM TEXT"},
        {"role": "user", "content": "How do I install Kestrel on Kubernetes?"},
        {"role": "assistant", "content": "Use the Helm chart [install-kubernetes.md#1]."},
        {"role": "user", "content": "Which Kubernetes versions are supported?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Recent ones, see the notes."}]},
        {"role": "user", "content": "And on ARM?"},
    ]
    with client(running) as openai_client:
        openai_client.chat.completions.create(model="m", messages=messages)
    prompt = fake_model.history[-1]
    assert [m.role for m in prompt] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m.content for m in prompt[1:5]] == [
        "How do I install Kestrel on Kubernetes?",
        "Use the Helm chart [install-kubernetes.md#1].",
        "Which Kubernetes versions are supported?",
        "Recent ones, see the notes.",
    ]
    assert prompt[-1].content.rstrip().endswith("And on ARM?")
    assert prompt[0].content == running.components.settings.prompt.system_prompt
    assert all("IGNORED SYSTEM TEXT" not in m.content for m in prompt)
    with running.client() as http:
        assert http.get("/v1/conversations").json()["data"] == []  # stateless: nothing stored


def test_errors_reach_the_openai_client_as_its_own_exceptions(running, fake_model) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    with client(running) as openai_client:
        with pytest.raises(openai.BadRequestError) as bad:
            openai_client.chat.completions.create(model="m", messages=[{"role": "assistant", "content": "hi"}])
        fake_model.enqueue(ModelUnavailableError("endpoint http://10.9.8.7:8000 refused the connection"))
        with pytest.raises(openai.InternalServerError) as down:
            openai_client.chat.completions.create(model="m", messages=messages, stream=True)
    with client(running, api_key="not-a-jwt") as anonymous, pytest.raises(openai.AuthenticationError) as denied:
        anonymous.chat.completions.create(model="m", messages=messages)
    assert "last message must come from the user" in bad.value.message
    assert (bad.value.param, bad.value.code) == ("messages[0].role", "invalid_value")
    assert down.value.status_code == 503 and "10.9.8.7" not in str(down.value.body)
    assert down.value.response.headers["retry-after"] and down.value.code == "model_unavailable"
    assert denied.value.code == "invalid_authentication"


@pytest.mark.parametrize(
    ("messages", "param", "code"),
    [
        ([{"role": "user", "content": "x" * 16_001}], "messages[0]", "string_above_max_length"),
        ([{"role": "user", "content": "hi"}, {"role": "system", "content": "be brief"}], "messages[1].role",
         "invalid_value"),
    ],
)  # fmt: skip
def test_a_bad_request_names_its_param_and_code_for_the_openai_client(running, messages, param, code) -> None:
    with client(running) as openai_client, pytest.raises(openai.BadRequestError) as bad:
        openai_client.chat.completions.create(model="m", messages=messages)
    assert (bad.value.param, bad.value.code, bad.value.type) == (param, code, "invalid_request_error")


def test_a_schema_violation_names_the_first_field_at_fault(running) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    with client(running) as openai_client:
        with pytest.raises(openai.UnprocessableEntityError) as typed:
            openai_client.chat.completions.create(model="m", messages=[{"role": "wizard", "content": "x"}])
        with pytest.raises(openai.UnprocessableEntityError) as ranged:
            openai_client.chat.completions.create(model="m", messages=messages, temperature=7)
    assert (typed.value.param, typed.value.code) == ("messages[0].role", "invalid_value")
    assert (ranged.value.param, ranged.value.code) == ("temperature", "invalid_value")


def test_a_model_failing_mid_stream_ends_the_stream_with_an_error_event(tmp_path) -> None:
    class FailsMidway(FakeChatModel):
        def stream(self, messages, options):
            return ChatStream(lambda usage: self._fail_midway())

        async def _fail_midway(self):
            yield "A first sentence. Then"
            raise ModelUnavailableError("the model server went away")

    settings = settings_for(tmp_path, answer_check="off")  # the text is invented: this tests the transport
    with serve(settings, components_for(settings, FailsMidway())) as running:
        received = []
        with client(running) as openai_client, pytest.raises(openai.APIError, match="unavailable"):
            stream = openai_client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTION}], stream=True
            )
            for chunk in stream:
                received.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in received if c.choices) == "A first sentence."


def test_the_http_stream_sends_only_checked_units_and_never_the_rewrite(tmp_path) -> None:
    """Through uvicorn, SSE and the openai client: the model's invented command is not sent, and the rewrite the
    retriever used never reaches the stream."""
    invented = "Then run sudo systemctl start kestrel-host -n 128.04k to finish."
    rewrite = "How do I install Kestrel on Kubernetes on arm64 nodes?"

    def answer(messages) -> str:
        return f"{echo_first_context(messages).split(' [')[0]}. {invented}"

    model = FakeChatModel([rewrite, answer], token_delay_s=0.001)
    settings = settings_for(tmp_path, rewriter="model")
    with serve(settings, components_for(settings, model)) as running, client(running) as openai_client:
        stream = openai_client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "Use the Helm chart."},
                {"role": "user", "content": "And on ARM?"},
            ],
            stream=True,
        )
        chunks = [c for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text  # the supported sentence was streamed
    assert "systemctl" not in text and "128.04k" not in text
    assert rewrite not in text and "arm64 nodes" not in text
