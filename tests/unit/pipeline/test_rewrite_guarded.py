"""GuardedRewriter: one model call per follow-up, validated, failing open to HistoryExpansion; and in the engine."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from anaphora import Anaphora, FakeChatModel
from anaphora.errors import ModelUnavailableError
from anaphora.metrics import Metrics
from anaphora.pipeline.engine import NO_ANSWER
from anaphora.pipeline.query import QueryStage
from anaphora.pipeline.rewrite import JSON_ANALYSIS, REWRITE_INSTRUCTIONS, GuardedRewriter, HistoryExpansion
from anaphora.pipeline.stages import QueryPlanner
from anaphora.testing.stages import run_stage, turn_state
from anaphora.types import Message

pytestmark = pytest.mark.unit

HISTORY = [
    Message(role="user", content="How do I install Kestrel on Kubernetes?"),
    Message(role="assistant", content="Install the Helm chart kestrel/kestrel into its own namespace."),
]
FOLLOW_UP = "And on ARM?"
GOOD_REWRITE = "How do I install Kestrel on Kubernetes on ARM?"


def long_history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(turns):
        messages.append(Message(role="user", content=f"Question turn-{i:02d}-marker about Kestrel?"))
        messages.append(Message(role="assistant", content=f"Answer turn-{i:02d}-answer about Kestrel."))
    return messages


@dataclass(frozen=True)
class Planned:
    """What the query stage made of a strategy's run: the plan's fields and the stage's verdict."""

    query: str
    source: str
    status: str
    detail: str
    model_calls: int


async def plan_with(
    strategy: QueryStage, question: str, history: list[Message], *, metrics: Metrics | None = None, timeout_s=10.0
) -> Planned:
    """Run ``strategy`` as the engine does: in the query stage, observed and failing open."""
    stage = QueryPlanner(strategy, timeout_s=timeout_s)
    state, record = await run_stage(stage, turn_state(question, history), metrics=metrics)
    assert state.plan is not None and record is not None
    calls = sum(call.purpose == "rewrite" for call in state.calls)
    return Planned(state.plan.query, state.plan.source, record.status, record.detail, calls)


# --- turn 1 -----------------------------------------------------------------------------------------------------


async def test_turn_one_makes_no_model_call(fake_model: FakeChatModel) -> None:
    metrics = Metrics()
    plan = await plan_with(GuardedRewriter(fake_model), "How do I install Kestrel?", [], metrics=metrics)
    assert fake_model.calls == []
    assert plan.status == "skipped"
    assert plan.query == "How do I install Kestrel?"
    assert plan.source == "question"
    assert plan.model_calls == 0
    assert metrics.value("anaphora_rewriter_requests_total", status="skipped") == 1


# --- accepted rewrites ------------------------------------------------------------------------------------------


async def test_good_rewrite_is_accepted(fake_model: FakeChatModel) -> None:
    fake_model.enqueue(GOOD_REWRITE)
    plan = await GuardedRewriter(fake_model).run(FOLLOW_UP, HISTORY)
    assert plan.status == "ok"
    assert plan.source == "rewrite"
    assert plan.model_calls == 1
    assert plan.query == GOOD_REWRITE
    assert len(fake_model.calls) == 1


async def test_rewrite_call_options_are_deterministic_short_and_single_line(fake_model: FakeChatModel) -> None:
    fake_model.enqueue(GOOD_REWRITE)
    await GuardedRewriter(fake_model).run(FOLLOW_UP, HISTORY)
    options = fake_model.calls[0].options
    assert options.temperature == 0
    assert 0 < options.max_tokens <= 256
    assert "\n" in options.stop


async def test_rewrite_prompt_shows_only_recent_turns_and_the_question_last(fake_model: FakeChatModel) -> None:
    fake_model.enqueue("How do I upgrade Kestrel?")
    history = long_history(12)
    await GuardedRewriter(fake_model, history_turns=4).run("How do I upgrade it?", history)
    messages = fake_model.calls[0].messages
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == REWRITE_INSTRUCTIONS
    prompt = messages[-1].content
    for i in range(8):  # the 8 oldest turns are out of the 4-turn window
        assert f"turn-{i:02d}-" not in prompt
    for i in range(8, 12):
        assert f"turn-{i:02d}-marker" in prompt
        assert f"turn-{i:02d}-answer" in prompt
    assert prompt.count("User: ") == 4
    assert prompt.endswith("Last message: How do I upgrade it?\nQuery:")
    # oldest first, the question after all of them
    positions = [prompt.index(f"turn-{i:02d}-marker") for i in range(8, 12)]
    assert positions == sorted(positions)
    assert positions[-1] < prompt.index("Last message:")


async def test_default_window_is_six_turns(fake_model: FakeChatModel) -> None:
    fake_model.enqueue("How do I upgrade Kestrel?")
    await GuardedRewriter(fake_model).run("How do I upgrade it?", long_history(12))
    prompt = fake_model.calls[0].messages[-1].content
    assert "turn-05-" not in prompt
    assert "turn-06-marker" in prompt
    assert prompt.count("User: ") == 6


async def test_long_assistant_answers_are_clipped_in_the_rewrite_prompt(fake_model: FakeChatModel) -> None:
    fake_model.enqueue(GOOD_REWRITE)
    answer = " ".join(f"word{i}" for i in range(200))
    history = [HISTORY[0], Message(role="assistant", content=answer)]
    await GuardedRewriter(fake_model).run(FOLLOW_UP, history)
    prompt = fake_model.calls[0].messages[-1].content
    assert "word59" in prompt and "word60" not in prompt
    assert "word0 " in prompt and " ..." in prompt


@pytest.mark.parametrize(
    "reply",
    [
        f"Standalone question: {GOOD_REWRITE}",
        f'Standalone question: "{GOOD_REWRITE}"',
        f"Query: {GOOD_REWRITE}",
        f"Rewritten query - {GOOD_REWRITE}",
        f"“{GOOD_REWRITE}”",
        f"  '{GOOD_REWRITE}'  ",
    ],
)
async def test_preamble_and_quotes_are_stripped(fake_model: FakeChatModel, reply: str) -> None:
    fake_model.enqueue(reply)
    plan = await GuardedRewriter(fake_model).run(FOLLOW_UP, HISTORY)
    assert plan.status == "ok"
    assert plan.query == GOOD_REWRITE


# --- rejected rewrites ------------------------------------------------------------------------------------------

REJECTED = [
    ("", "empty"),
    ("   ", "empty"),
    ('""', "empty"),
    ("How do I install Kestrel on ARM?\nAlso on Kubernetes?", "multi-line"),
    (" ".join(["Kestrel Kubernetes Helm chart install namespace ARM"] * 8), "too long"),
    ("Yes, you can install it with Helm.", "answers instead of asking"),
    ("arm arm arm arm", "loops"),
    ("How do I install Kestrel on Kubernetes?", "drops the user's words"),
    ("How do I install Kestrel on ARM with Terraform?", "introduces words from nowhere (terraform)"),
    ("Как установить Kestrel на ARM?", "switched language"),
]


@pytest.mark.parametrize(("reply", "reason"), REJECTED, ids=[r for _, r in REJECTED])
async def test_bad_rewrite_is_rejected_and_falls_back_to_expansion(
    fake_model: FakeChatModel, reply: str, reason: str
) -> None:
    fake_model.enqueue(reply)
    metrics = Metrics()
    plan = await plan_with(GuardedRewriter(fake_model), FOLLOW_UP, HISTORY, metrics=metrics)
    assert plan.status == "rejected"
    assert reason in plan.detail
    expected_query, expanded = HistoryExpansion().expand(FOLLOW_UP, HISTORY)
    assert expanded
    assert plan.query == expected_query
    assert plan.query.startswith(FOLLOW_UP) and "Kestrel" in plan.query
    assert plan.source == "expansion"
    assert plan.model_calls == 1
    assert metrics.value("anaphora_rewriter_requests_total", status="rejected") == 1
    assert metrics.value("anaphora_rewriter_requests_total", status="ok") == 0


async def test_a_standalone_message_is_the_query_without_a_model_call(fake_model: FakeChatModel) -> None:
    question = "What memory limit does the Kestrel agent need?"
    fake_model.enqueue("Yes, the agent needs 512 MiB.")  # would be rejected; it is never asked
    plan = await GuardedRewriter(fake_model).run(question, HISTORY)
    assert (plan.query, plan.source, plan.status, plan.model_calls) == (question, "question", "ok", 0)
    # the message leads; the topic's model-free expansion rides along (HistoryExpansion.topic_alternate)
    assert plan.queries == [question, HistoryExpansion().topic_alternate(question, HISTORY)]
    assert fake_model.calls == []


async def test_a_message_that_announces_a_new_topic_makes_no_model_call(fake_model: FakeChatModel) -> None:
    """A message opening with "unrelated:" stands alone for a capable model too: its pronouns point inside it."""
    question = "unrelated: can I rotate its token?"
    fake_model.enqueue("How do I rotate the Kestrel Helm chart token?")  # never asked
    plan = await GuardedRewriter(fake_model).run(question, HISTORY)
    assert (plan.query, plan.source, plan.model_calls) == (question, "question", 0)
    assert fake_model.calls == []


async def test_accepted_rewrite_rides_behind_the_model_free_expansion(fake_model: FakeChatModel) -> None:
    fake_model.enqueue(GOOD_REWRITE)
    plan = await GuardedRewriter(fake_model).run(FOLLOW_UP, HISTORY)
    expansion, expanded = HistoryExpansion().expand(FOLLOW_UP, HISTORY)
    assert expanded
    assert plan.query == GOOD_REWRITE and plan.source == "rewrite"
    assert plan.queries == [expansion, GOOD_REWRITE, FOLLOW_UP]  # the expansion leads the fusion


async def test_the_analysis_style_still_asks_the_model_about_a_standalone_message(fake_model: FakeChatModel) -> None:
    """The structured analysis decides the turn's kind too, so it is asked; its rewrite only rides along."""
    question = "What memory limit does the Kestrel agent need?"
    rewrite = "What memory limit does the Kestrel agent need on Kubernetes?"
    fake_model.enqueue(f'{{"kind": "new_query", "answered_by_conversation": false, "query": "{rewrite}"}}')
    plan = await GuardedRewriter(fake_model, style=JSON_ANALYSIS).run(question, HISTORY)
    assert plan.status == "ok" and plan.model_calls == 1
    assert plan.query == question and plan.source == "question"
    # the message leads; the rewrite and the topic's expansion only ride along
    assert plan.queries == [question, rewrite, HistoryExpansion().topic_alternate(question, HISTORY)]


# --- failures fail open -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [ModelUnavailableError("endpoint down", hint="start the server"), RuntimeError("boom"), ValueError("bad json")],
    ids=lambda e: type(e).__name__,
)
async def test_model_error_falls_back(fake_model: FakeChatModel, exc: Exception) -> None:
    fake_model.enqueue(exc)
    metrics = Metrics()
    plan = await plan_with(GuardedRewriter(fake_model), FOLLOW_UP, HISTORY, metrics=metrics)
    assert plan.status == "error"
    assert type(exc).__name__ in plan.detail
    assert plan.query == HistoryExpansion().expand(FOLLOW_UP, HISTORY)[0]
    assert plan.source == "expansion"
    assert metrics.value("anaphora_rewriter_requests_total", status="error") == 1


async def test_callable_reply_that_raises_falls_back(fake_model: FakeChatModel) -> None:
    def explode(messages):
        raise KeyError("tokenizer")

    fake_model.enqueue(explode)
    plan = await plan_with(GuardedRewriter(fake_model), FOLLOW_UP, HISTORY)
    assert plan.status == "error"
    assert plan.query.startswith(FOLLOW_UP)


async def test_slow_model_times_out_and_falls_back() -> None:
    slow = FakeChatModel([GOOD_REWRITE], delay_s=2.0)
    metrics = Metrics()
    started = time.perf_counter()
    plan = await plan_with(GuardedRewriter(slow), FOLLOW_UP, HISTORY, metrics=metrics, timeout_s=0.05)
    assert time.perf_counter() - started < 1.0
    assert plan.status == "timeout"
    assert "0.05" in plan.detail
    assert plan.query == HistoryExpansion().expand(FOLLOW_UP, HISTORY)[0]
    assert plan.query != GOOD_REWRITE
    assert metrics.value("anaphora_rewriter_requests_total", status="timeout") == 1


async def test_metrics_count_every_status(fake_model: FakeChatModel) -> None:
    metrics = Metrics()
    rewriter = GuardedRewriter(fake_model)
    await plan_with(rewriter, "How do I install Kestrel?", [], metrics=metrics)  # skipped
    fake_model.enqueue(GOOD_REWRITE, GOOD_REWRITE, "Yes, use Helm.", RuntimeError("x"))
    for _ in range(4):
        await plan_with(rewriter, FOLLOW_UP, HISTORY, metrics=metrics, timeout_s=0.05)
    rewriter.model = FakeChatModel([GOOD_REWRITE], delay_s=1.0)
    await plan_with(rewriter, FOLLOW_UP, HISTORY, metrics=metrics, timeout_s=0.05)
    counts = {
        status: metrics.value("anaphora_rewriter_requests_total", status=status)
        for status in ("skipped", "ok", "rejected", "error", "timeout")
    }
    assert counts == {"skipped": 1, "ok": 2, "rejected": 1, "error": 1, "timeout": 1}


# --- in the engine ----------------------------------------------------------------------------------------------

FIRST = "How do I install Kestrel on Kubernetes?"


def _answer_calls(fake: FakeChatModel, rag: Anaphora):
    return [c for c in fake.calls if c.messages[0].content.startswith(rag.settings.prompt.system_prompt)]


@pytest.mark.parametrize(
    ("inject", "status"),
    [
        (ModelUnavailableError("endpoint down"), "error"),
        (RuntimeError("boom"), "error"),
        ("Yes, you can install it with Helm.", "rejected"),
        ("", "rejected"),
        ("Как установить Kestrel на ARM?", "rejected"),
        ("slow", "timeout"),
        (GOOD_REWRITE, "ok"),
    ],
    ids=["unavailable", "runtime-error", "answers", "empty", "language", "timeout", "accepted"],
)
def test_engine_turn_answers_whatever_the_rewrite_does(
    sample_rag: Anaphora, fake_model: FakeChatModel, inject, status: str
) -> None:
    conversation = sample_rag.new_conversation()
    first = sample_rag.ask(FIRST, conversation)
    assert len(fake_model.calls) == 1  # turn 1: no rewrite call
    if inject == "slow":
        next(s for s in sample_rag.components.engine.stages if s.name == "query").timeout_s = 0.05
        fake_model.delay_s = 0.2
        fake_model.enqueue(GOOD_REWRITE)
    else:
        fake_model.enqueue(inject)
    result = sample_rag.ask(FOLLOW_UP, conversation)

    assert len(fake_model.calls) == 3  # rewrite + answer
    rewrite_call, answer_call = fake_model.calls[1], fake_model.calls[2]
    assert rewrite_call.messages[0].content == REWRITE_INSTRUCTIONS
    assert answer_call.messages[0].content.startswith(sample_rag.settings.prompt.system_prompt)
    query_stage = result.trace.stage("query")
    assert query_stage is not None and query_stage.status == status
    assert result.trace.stage("answer").status == "ok"
    assert result.answer and result.answer != NO_ANSWER
    assert result.citations
    assert result.trace.model_calls == 2
    assert result.trace.retrieved
    if status == "ok":
        assert result.trace.query == GOOD_REWRITE
        assert result.trace.query_source == "rewrite"
    else:
        # the fallback: the expansion with this corpus's disambiguating words (none: the message alone)
        history = [Message(role="user", content=FIRST), Message(role="assistant", content=first.answer)]
        expected = sample_rag.components.stage_parts.query_stage.fallback.plan(FOLLOW_UP, history)
        assert result.trace.query.startswith(FOLLOW_UP)
        assert (result.trace.query, result.trace.query_source) == (expected.query, expected.source)
    metrics = sample_rag.components.engine.metrics
    assert metrics.value("anaphora_rewriter_requests_total", status=status) == 1
    assert metrics.value("anaphora_rewriter_requests_total", status="skipped") == 1
    assert metrics.value("anaphora_model_calls_total", purpose="rewrite") == 1
    assert metrics.value("anaphora_model_calls_total", purpose="answer") == 2


def test_generator_gets_the_original_words_never_the_rewrite(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    conversation = sample_rag.new_conversation()
    sample_rag.ask(FIRST, conversation)
    fake_model.enqueue(GOOD_REWRITE)
    result = sample_rag.ask(FOLLOW_UP, conversation)
    assert result.trace.stage("query").status == "ok"
    assert result.trace.query == GOOD_REWRITE
    answer_messages = fake_model.calls[-1].messages
    final = answer_messages[-1]
    assert final.role == "user"
    assert final.content.endswith(f"Question: {FOLLOW_UP}")
    for message in answer_messages:
        assert GOOD_REWRITE not in message.content
    # the stored turn keeps the user's words too
    assert result.question == FOLLOW_UP


def test_first_engine_turn_calls_the_model_once(sample_rag: Anaphora, fake_model: FakeChatModel) -> None:
    result = sample_rag.ask(FIRST, sample_rag.new_conversation())
    assert len(fake_model.calls) == 1
    assert result.trace.stage("query").status == "skipped"
    assert result.trace.query == FIRST
    assert _answer_calls(fake_model, sample_rag) == fake_model.calls
