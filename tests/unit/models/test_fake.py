"""FakeChatModel: scripted replies, recording, the default echo, streaming and latency."""

from __future__ import annotations

import copy
import time

import pytest

from anaphora.models import ChatModel, ChatOptions, ChatReply, FakeChatModel, approx_tokens
from anaphora.models.fake import RecordedCall, echo_first_context
from anaphora.pipeline.prompt import build_messages
from anaphora.testing.chat_model_contract import ChatModelContract
from anaphora.types import Message, Passage

pytestmark = pytest.mark.unit

OPTS = ChatOptions()


def _msgs(*contents: str) -> list[Message]:
    """One content: a user message. Several: a system message first, the rest user messages."""
    if len(contents) == 1:
        return [Message(role="user", content=contents[0])]
    return [Message(role="system", content=contents[0])] + [Message(role="user", content=c) for c in contents[1:]]


async def _collect(model, messages, options=OPTS) -> str:
    return "".join([piece async for piece in model.stream(messages, options)])


def test_fake_satisfies_chat_model_protocol() -> None:
    assert isinstance(FakeChatModel(), ChatModel)
    assert FakeChatModel().name == "fake"


async def test_enqueued_strings_are_returned_in_order_then_default() -> None:
    model = FakeChatModel(default="DEFAULT")
    model.enqueue("one", "two")
    model.enqueue("three")
    texts = [(await model.chat(_msgs("s", "q"), OPTS)).text for _ in range(5)]
    assert texts == ["one", "two", "three", "DEFAULT", "DEFAULT"]


async def test_constructor_replies_come_before_enqueued_ones() -> None:
    model = FakeChatModel(["first"], default="D")
    model.enqueue("second")
    assert (await model.chat(_msgs("q"), OPTS)).text == "first"
    assert (await model.chat(_msgs("q"), OPTS)).text == "second"
    assert (await model.chat(_msgs("q"), OPTS)).text == "D"


async def test_enqueued_exception_is_raised_in_turn_and_queue_continues() -> None:
    boom = RuntimeError("boom")
    model = FakeChatModel(default="D")
    model.enqueue("before", boom, "after")
    assert (await model.chat(_msgs("q1"), OPTS)).text == "before"
    with pytest.raises(RuntimeError, match="boom") as info:
        await model.chat(_msgs("q2"), OPTS)
    assert info.value is boom
    assert (await model.chat(_msgs("q3"), OPTS)).text == "after"
    # the failing call is recorded too
    assert [h[-1].content for h in model.history] == ["q1", "q2", "q3"]


async def test_enqueued_callable_receives_the_messages() -> None:
    seen: list[list[Message]] = []

    def reply(messages) -> str:
        seen.append(list(messages))
        return f"got {len(messages)}: {messages[-1].content}"

    model = FakeChatModel()
    model.enqueue(reply)
    messages = _msgs("sys", "hello")
    out = await model.chat(messages, OPTS)
    assert out.text == "got 2: hello"
    assert [m.content for m in seen[0]] == ["sys", "hello"]


async def test_callable_default_is_used_for_every_call_when_queue_empty() -> None:
    model = FakeChatModel(default=lambda ms: ms[-1].content.upper())
    assert (await model.chat(_msgs("abc"), OPTS)).text == "ABC"
    assert (await model.chat(_msgs("xyz"), OPTS)).text == "XYZ"


async def test_exception_default_is_raised() -> None:
    model = FakeChatModel(default=ValueError("no model"))
    with pytest.raises(ValueError, match="no model"):
        await model.chat(_msgs("q"), OPTS)


async def test_history_and_calls_record_messages_and_options() -> None:
    model = FakeChatModel(default="ok")
    o1 = ChatOptions(temperature=0.7, max_tokens=11, stop=("\n",), json_mode=True)
    o2 = ChatOptions()
    await model.chat(_msgs("sys", "first"), o1)
    await model.chat(_msgs("sys", "second"), o2)

    assert len(model.calls) == 2
    assert all(isinstance(c, RecordedCall) for c in model.calls)
    assert model.calls[0].options == o1
    assert model.calls[1].options == o2
    assert model.history == [
        [Message(role="system", content="sys"), Message(role="user", content="first")],
        [Message(role="system", content="sys"), Message(role="user", content="second")],
    ]
    assert model.calls[0].prompt == "system: sys\nuser: first"


async def test_recorded_history_is_a_snapshot_not_the_callers_objects() -> None:
    model = FakeChatModel(default="ok")
    messages = _msgs("sys", "original")
    await model.chat(messages, OPTS)
    messages[1].content = "changed afterwards"
    messages.append(Message(role="user", content="appended"))
    assert model.history == [[Message(role="system", content="sys"), Message(role="user", content="original")]]


async def test_chat_and_stream_do_not_mutate_messages() -> None:
    model = FakeChatModel()
    messages = build_messages("sys", [Message(role="user", content="hi")], [Passage(id="a", text="x\ny")], "q")
    snapshot = copy.deepcopy(messages)
    model.enqueue("r1", lambda ms: "r2")
    await model.chat(messages, OPTS)
    await _collect(model, messages)
    await model.chat(messages, OPTS)  # default echo
    assert messages == snapshot


async def test_chat_reply_counts_tokens() -> None:
    model = FakeChatModel(default="twelve chars")
    messages = _msgs("abcd", "abcdefgh")
    reply = await model.chat(messages, OPTS)
    assert isinstance(reply, ChatReply)
    assert reply.prompt_tokens == approx_tokens("abcd") + approx_tokens("abcdefgh") == 3
    assert reply.completion_tokens == approx_tokens("twelve chars") == 3
    assert model.count_tokens("") == 0


# --- the default echo ---------------------------------------------------------------------------------------


async def test_default_reply_echoes_first_excerpt_and_cites_it() -> None:
    passages = [
        Passage(
            id="install.md#2",
            text="Run pip install anaphora.\nThen run anaphora ingest.",
            source="install.md",
        ),
        Passage(id="other.md#1", text="Something else entirely.", source="other.md"),
    ]
    messages = build_messages("sys", [], passages, "How do I install it?")
    reply = await FakeChatModel().chat(messages, OPTS)
    assert reply.text == "Run pip install anaphora. [install.md#2]"


async def test_default_reply_with_heading_and_source_label() -> None:
    passages = [Passage(id="g#1", text="\n  First real line  \nsecond", source="guide.md", heading="Setup")]
    messages = build_messages("sys", [], passages, "q")
    assert (await FakeChatModel().chat(messages, OPTS)).text == "First real line [g#1]"


async def test_default_reply_echoes_excerpt_without_source() -> None:
    messages = build_messages("sys", [], [Passage(id="a", text="only line")], "q")
    assert (await FakeChatModel().chat(messages, OPTS)).text == "only line [a]"


async def test_default_reply_without_context() -> None:
    model = FakeChatModel()
    assert (await model.chat(build_messages("sys", [], None, "hello?"), OPTS)).text == (
        "I have no documents about that."
    )
    assert echo_first_context([]) == "I have no documents about that."


def test_default_echo_truncates_long_lines() -> None:
    content = "<<<CONTEXT>>>\n[x] (src)\n" + "w" * 500 + "\n<<<END CONTEXT>>>\n\nQuestion: q"
    out = echo_first_context([Message(role="user", content=content)])
    assert out == "w" * 160 + " [x]"


# --- streaming and latency ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["hello world", "  leading and trailing  ", "multi\nline\n\n text\twith  gaps ", "single", ""],
)
async def test_stream_concatenation_equals_chat_text(text: str) -> None:
    model = FakeChatModel(default=text)
    chat_text = (await model.chat(_msgs("q"), OPTS)).text
    pieces = [p async for p in model.stream(_msgs("q"), OPTS)]
    assert "".join(pieces) == chat_text == text
    if len(text.split()) > 1:
        assert len(pieces) > 1  # it really streams in pieces


async def test_stream_default_echo_equals_chat() -> None:
    messages = build_messages("sys", [], [Passage(id="d#1", text="Alpha beta gamma.", source="d")], "q")
    model = FakeChatModel()
    assert await _collect(model, messages) == (await model.chat(messages, OPTS)).text == "Alpha beta gamma. [d#1]"


async def test_stream_consumes_queue_and_records_call() -> None:
    model = FakeChatModel(default="D")
    model.enqueue("streamed reply", "chat reply")
    opts = ChatOptions(max_tokens=7)
    assert await _collect(model, _msgs("q"), opts) == "streamed reply"
    assert (await model.chat(_msgs("q"), OPTS)).text == "chat reply"
    assert len(model.calls) == 2
    assert model.calls[0].options == opts


async def test_stream_raises_enqueued_exception() -> None:
    model = FakeChatModel()
    model.enqueue(ConnectionError("down"))
    with pytest.raises(ConnectionError, match="down"):
        await _collect(model, _msgs("q"))


async def test_delay_s_adds_latency() -> None:
    fast = FakeChatModel(default="x")
    slow = FakeChatModel(default="x", delay_s=0.05)
    start = time.perf_counter()
    await fast.chat(_msgs("q"), OPTS)
    fast_elapsed = time.perf_counter() - start
    start = time.perf_counter()
    await slow.chat(_msgs("q"), OPTS)
    slow_elapsed = time.perf_counter() - start
    assert slow_elapsed >= 0.045
    assert fast_elapsed < slow_elapsed


async def test_delay_s_applies_before_raising() -> None:
    model = FakeChatModel(default=RuntimeError("late"), delay_s=0.03)
    start = time.perf_counter()
    with pytest.raises(RuntimeError):
        await model.chat(_msgs("q"), OPTS)
    assert time.perf_counter() - start >= 0.025


class TestFakeChatModelContract(ChatModelContract):
    caches_prompts = True

    @pytest.fixture
    def model(self):
        return FakeChatModel()


async def test_cached_tokens_are_the_prefix_shared_with_an_earlier_call() -> None:
    model = FakeChatModel(["a", "b", "c"])
    system = Message(role="system", content="s" * 400)
    first = await model.chat([system, Message(role="user", content="one")], OPTS)
    assert first.usage.cached_tokens == 0
    second = await model.chat([system, Message(role="user", content="two")], OPTS)
    assert second.usage.cached_tokens == approx_tokens("s" * 400)  # the system message; "one"/"two" share nothing
    unrelated = await model.chat([Message(role="user", content="x" * 40)], OPTS)
    assert unrelated.usage.cached_tokens == 0  # it shares no prefix with either earlier prompt
