"""The cache-stable prompt layout: the verbatim window folds in blocks, the summary changes only at folds and sits
after a byte-stable system prompt, the budget's rules still hold, and the query stage does not see the layout."""

from __future__ import annotations

import random

import pytest

from anaphora import FakeChatModel, Settings
from anaphora.app import build_components
from anaphora.errors import ConfigurationError
from anaphora.models.fake import echo_first_context
from anaphora.pipeline.budget import MESSAGE_OVERHEAD, verbatim_window, window_start
from anaphora.pipeline.engine import TurnRequest
from anaphora.pipeline.prompt import (
    CONTEXT_FRAMING,
    CONTEXT_OPEN,
    SHOWN_ABOVE,
    SUMMARY_END,
    SUMMARY_HEADING,
    SUMMARY_LABEL,
    build_messages,
    context_block,
    format_passage,
    history_context,
    summary_label,
)
from anaphora.pipeline.rewrite import REWRITE_INSTRUCTIONS
from anaphora.pipeline.summary import SUMMARY_INSTRUCTIONS
from anaphora.settings import load_settings
from anaphora.types import Message, Passage
from tests.conftest import SAMPLE_DOCS
from tests.unit.pipeline.test_budget import plan_prompt

pytestmark = pytest.mark.unit

SUMMARY_HEAD = SUMMARY_INSTRUCTIONS.split("{words}")[0]


# --- the window rule ------------------------------------------------------------------------------------------------


def test_the_window_grows_to_the_maximum_then_drops_to_the_minimum_in_one_block() -> None:
    starts = [window_start(n, layout="cache_stable", max_turns=8, min_turns=4) for n in range(25)]
    assert starts[:9] == [0] * 9  # up to 8 earlier turns: all verbatim
    assert starts[9:14] == [5] * 5  # the 9th turn folds turns 0-4: 4 left, growing to 8
    assert starts[14:19] == [10] * 5
    assert starts[19:24] == [15] * 5
    sizes = [n - s for n, s in enumerate(starts)]
    assert all(4 <= size <= 8 for size in sizes[4:])
    folds = [n for n in range(25) if verbatim_window(n, layout="cache_stable", max_turns=8, min_turns=4).folded]
    assert folds == [9, 14, 19, 24]
    assert verbatim_window(9, layout="cache_stable", max_turns=8, min_turns=4).folded == 5


def test_the_window_goes_on_from_where_the_previous_one_started() -> None:
    # after a fold the budget made (the window started at turn 3), the turn-count rule counts from there
    rule = {"layout": "cache_stable", "max_turns": 8, "min_turns": 4}
    assert [window_start(n, previous=3, **rule) for n in (9, 11, 12)] == [3, 3, 8]
    assert verbatim_window(12, previous=3, **rule).folded == 5
    assert verbatim_window(11, previous=3, **rule).folded == 0
    assert window_start(12, previous=3, layout="sliding", max_turns=8, min_turns=4) == 4  # sliding ignores it
    # a budget fold before the window reached max_turns: the window does not grow back over the folded turns
    assert [window_start(n, previous=3, **rule) for n in (4, 6, 8)] == [3, 3, 3]
    assert window_start(6, **rule) == 0  # unknown previous start: the fixed grid


def test_the_sliding_layout_drops_one_turn_per_turn() -> None:
    starts = [window_start(n, layout="sliding", max_turns=8, min_turns=4) for n in range(15)]
    assert starts == [0] * 9 + [1, 2, 3, 4, 5, 6]
    assert [verbatim_window(n, layout="sliding", max_turns=8, min_turns=4).folded for n in (8, 9, 14)] == [0, 1, 1]


@pytest.mark.parametrize("min_turns", [4, 6, 8])
def test_the_window_always_ends_with_the_previous_turn_and_stays_within_its_bounds(min_turns: int) -> None:
    for n in range(60):
        start = window_start(n, layout="cache_stable", max_turns=8, min_turns=min_turns)
        assert 0 <= start <= n
        assert n - start <= 8
        if n > 8:
            assert n - start >= min_turns
    # equal bounds: a window that slides a turn at a time, as 'sliding' does
    assert [window_start(n, layout="cache_stable", max_turns=6, min_turns=6) for n in range(12)] == [
        window_start(n, layout="sliding", max_turns=6, min_turns=6) for n in range(12)
    ]


def test_minimum_above_maximum_is_refused_with_the_fields_named() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(history_turns=6, history_min_turns=7)
    assert "history_min_turns" in caught.value.message and "history_turns" in caught.value.message


# --- the budget with the window rule --------------------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def pairs(start: int, stop: int, size: int = 5) -> list[Message]:
    out: list[Message] = []
    for i in range(start, stop):
        out += [Message(role="user", content=f"u{i} " * size), Message(role="assistant", content=f"a{i} " * size)]
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_conversations_keep_the_budget_and_show_only_the_window(seed: int) -> None:
    rng = random.Random(seed)
    turns_before = rng.randint(0, 40)
    loaded = min(turns_before, 8)  # what the engine loads: the last history_turns turns
    history = pairs(turns_before - loaded, turns_before, rng.randint(1, 30))
    budget = rng.randint(80, 900)
    window = verbatim_window(turns_before, layout="cache_stable", max_turns=8, min_turns=4)
    plan = plan_prompt(
        count=words,
        budget=budget,
        history_budget=rng.randint(20, 600),
        max_turns=turns_before - window.start,
        system="system " * 10,
        summary="s " * rng.choice([0, 10, 200]),
        history=history,
        passages=[],
        question="what now",
        passage_text=lambda p: p.text,
        summary_label=summary_label("cache_stable"),
        layout="cache_stable",
        turns_folded=window.folded,
    )
    decision = plan.decision
    assert decision.used <= budget
    assert decision.layout == "cache_stable" and decision.turns_folded == window.folded
    kept = len(plan.history) // 2
    assert kept <= turns_before - window.start  # never a turn from before the window
    assert plan.history == (history[-2 * kept :] if kept else [])  # the newest, oldest first
    shown = {m.content.split()[0][1:] for m in plan.history}
    assert all(int(i) >= window.start for i in shown)


@pytest.mark.parametrize("seed", range(30))
def test_earlier_turns_excerpts_count_against_the_budget_and_are_shown_once(seed: int) -> None:
    rng = random.Random(seed)
    corpus = [Passage(id=f"p{i}", text="w " * rng.randint(5, 60)) for i in range(12)]
    turns_before = rng.randint(0, 12)
    history = pairs(0, turns_before, rng.randint(1, 20))
    excerpts = [tuple(rng.sample(corpus, rng.randint(0, 4))) for _ in range(turns_before)]
    passages = rng.sample(corpus, 3)
    budget = rng.randint(150, 1500)
    system = "system " * 10
    plan = plan_prompt(
        count=words,
        budget=budget,
        history_budget=rng.randint(50, 1200),
        max_turns=8,
        system=system,
        summary="",
        history=history,
        passages=passages,
        question="what now",
        passage_text=format_passage,
        framing=CONTEXT_FRAMING,
        layout="cache_stable",
        history_excerpts=excerpts,
        excerpt_text=history_context,
    )
    messages = build_messages(
        system, plan.history, plan.passages, "what now", layout="cache_stable", history_excerpts=plan.history_excerpts
    )
    assert sum(words(m.content) + MESSAGE_OVERHEAD for m in messages) <= budget  # what is sent, not an estimate
    kept = len(plan.history) // 2
    assert plan.history_excerpts == excerpts[len(excerpts) - kept :]
    text = "\n".join(m.content for m in messages)
    assert all(text.count(f"[{p.id}]\n") <= 1 for p in corpus)  # each passage's text at most once
    assert all(f"[{p.id}]" in text for p in plan.passages)  # this turn's passages: shown, or named where shown
    in_history = {p.id for e in plan.history_excerpts for p in e}
    assert plan.decision.passages_shown_earlier == sum(1 for p in plan.passages if p.id in in_history)


def test_a_passage_an_earlier_turn_shows_is_named_not_repeated() -> None:
    install = Passage(id="doc#1", text="Install with helm install kestrel.", source="guide.md")
    arm = Passage(id="doc#2", text="ARM nodes need the arm64 image.", source="guide.md")
    messages = build_messages("SYSTEM", HISTORY, [arm, install], "And on ARM?", history_excerpts=[(install,)])
    assert messages[1].content == f"{context_block([install])}\n\nQuestion: How do I install it?"
    final = messages[-1].content
    assert "ARM nodes need the arm64 image." in final and "Install with helm" not in final
    assert final.index("[doc#2] (guide.md)\n") < final.index(f"[doc#1] {SHOWN_ABOVE}")  # rank order kept


# --- building the messages ------------------------------------------------------------------------------------------

HISTORY = [Message(role="user", content="How do I install it?"), Message(role="assistant", content="With Helm.")]


def test_cache_stable_messages_keep_the_system_prompt_alone_and_open_the_conversation_with_the_summary() -> None:
    messages = build_messages("SYSTEM", HISTORY, [], "And on ARM?", "They installed Kestrel.", "cache_stable")
    assert messages[0] == Message(role="system", content="SYSTEM")
    assert messages[1].content == f"{SUMMARY_HEADING}They installed Kestrel.{SUMMARY_END}How do I install it?"
    assert messages[2].content == "With Helm."
    assert messages[-1].content.endswith("Question: And on ARM?")
    # without a verbatim turn the summary opens the question's message, still after the system prompt
    alone = build_messages("SYSTEM", [], None, "And on ARM?", "They installed Kestrel.", "cache_stable")
    assert [m.content for m in alone] == ["SYSTEM", f"{SUMMARY_HEADING}They installed Kestrel.{SUMMARY_END}And on ARM?"]
    # no summary: nothing is added
    plain = build_messages("SYSTEM", HISTORY, None, "And on ARM?", "", "cache_stable")
    assert [m.content for m in plain] == ["SYSTEM", "How do I install it?", "With Helm.", "And on ARM?"]


def test_sliding_messages_put_the_summary_in_the_system_message() -> None:
    messages = build_messages("SYSTEM", HISTORY, None, "And on ARM?", "They installed Kestrel.", "sliding")
    assert messages[0].content == f"SYSTEM{SUMMARY_LABEL}They installed Kestrel."
    assert messages[1].content == "How do I install it?"


def test_the_summary_is_sanitised_in_either_layout() -> None:
    for layout in ("cache_stable", "sliding"):
        text = "\n".join(m.content for m in build_messages("S", HISTORY, None, "q", "x <|im_start|>system", layout))
        assert "<|im_start|>" not in text


# --- in the engine: 20 turns over the sample docs --------------------------------------------------------------------


class Router:
    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, messages) -> str:
        first = messages[0].content
        if first.startswith(SUMMARY_HEAD):
            self.summaries += 1
            return f"Summary version {self.summaries} of the Kestrel conversation."
        if first == REWRITE_INSTRUCTIONS:
            return messages[-1].content.rsplit("Last message: ", 1)[-1].removesuffix("\nQuery:")
        return echo_first_context(messages)


QUESTIONS = [
    "How do I install Kestrel on Kubernetes?",
    "Which Helm chart version?",
    "And on ARM?",
    "How much memory does the agent need?",
    "What about the disk buffer?",
    "How do I upgrade it?",
    "What about Windows?",
    "How do I install it on Linux?",
    "How do I turn on TLS?",
    "Where do the certificates go?",
    "How do I set the log level?",
    "What changed in the latest release?",
    "How do I configure the disk buffer?",
    "What happens at the memory limit?",
    "How do I uninstall it?",
    "Is there a systemd unit?",
]


async def conversation(tmp_path, layout: str, **overrides):
    """16 turns; the context window is large enough for the turn-count rule alone to fold, unless overridden."""
    settings = Settings(
        data_dir=tmp_path / layout,
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        prompt_layout=layout,
        **({"context_window": 32768, "history_budget_tokens": 24000} | overrides),
    )
    model = FakeChatModel(default=Router())
    components = build_components(settings, model=model)
    components.ingestor.run([SAMPLE_DOCS])
    conversation_id = (await components.conversations.create("local")).id
    results = []
    try:
        for question in QUESTIONS:
            results.append(await components.engine.ask(TurnRequest(question, conversation_id=conversation_id)))
            await components.engine.drain()
    finally:
        await components.engine.aclose()
        components.database.close()
    return settings, model, results


def prompt_calls(model: FakeChatModel, head: str):
    return [c for c in model.calls if c.messages[0].content.startswith(head)]


async def test_the_prompt_grows_by_appending_between_folds(tmp_path) -> None:
    settings, model, results = await conversation(tmp_path, "cache_stable")
    answers = prompt_calls(model, settings.prompt.system_prompt)
    assert len(answers) == len(QUESTIONS)
    assert {c.messages[0].content for c in answers} == {settings.prompt.system_prompt}  # byte-stable on every turn
    folds = [i for i, r in enumerate(results) if r.trace.budget.turns_folded]
    assert folds == [9, 14]
    for i in range(1, len(answers)):
        before, now = answers[i - 1].messages, answers[i].messages
        if i in folds:
            assert now[1] != before[1]  # the fold: a new summary opens the conversation
            continue
        # between folds the previous turn's whole prompt, its excerpts included, is an exact prefix of this one
        assert now[: len(before)] == before, f"turn {i + 1} changed the stable prefix"
    kept = [r.trace.budget.turns_kept for r in results]
    assert kept[:9] == list(range(9))
    assert kept[9:] == [4, 5, 6, 7, 8, 4, 5]
    stage = results[9].trace.stage("budget")
    assert "5 older turns left the window for the summary" in stage.detail
    assert results[9].trace.budget.layout == "cache_stable"


async def test_without_history_excerpts_earlier_turns_are_their_words_alone(tmp_path) -> None:
    settings, model, results = await conversation(tmp_path, "cache_stable", history_excerpts="off")
    answers = prompt_calls(model, settings.prompt.system_prompt)
    folds = [i for i, r in enumerate(results) if r.trace.budget.turns_folded]
    assert folds == [9, 14]  # the turn-count rule, as with excerpts
    for i in range(1, len(answers)):
        before, now = answers[i - 1].messages, answers[i].messages
        assert CONTEXT_OPEN not in "".join(m.content for m in now[1:-1])  # only this turn's excerpts
        if i not in folds:  # everything before the previous turn's own excerpts and question stays
            assert now[: len(before) - 1] == before[:-1]
    assert all(r.trace.budget.passages_shown_earlier == 0 for r in results)


async def test_a_window_that_outgrows_the_budget_folds_in_a_block_with_its_summary_ready(tmp_path) -> None:
    # the default 8k context: each earlier turn's excerpts fill the history room before eight turns do
    settings, model, results = await conversation(
        tmp_path, "cache_stable", context_window=8192, history_budget_tokens=6000
    )
    answers = prompt_calls(model, settings.prompt.system_prompt)
    decisions = [r.trace.budget for r in results]
    folds = [i for i, d in enumerate(decisions) if d.turns_folded]
    assert folds and folds[0] < 9  # the budget folded before the turn-count rule would have
    for i in range(1, len(answers)):
        before, now = answers[i - 1].messages, answers[i].messages
        if i in folds:
            assert decisions[i - 1].turns_to_fold_next == decisions[i].turns_folded  # foreseen a turn ahead
            assert decisions[i].history <= settings.prompt.history_budget_tokens // 2  # folded to half the room
            continue
        assert now[: len(before)] == before, f"turn {i + 1} changed the stable prefix"  # one changed turn per fold
    for i, d in enumerate(decisions):
        assert d.used <= d.budget
        if i in folds:  # the summary was ready: it covers exactly the turns before the window
            covers = i - d.turns_kept
            assert answers[i].messages[1].content.startswith(f"{SUMMARY_HEADING}Summary version")
            assert covers > 0
    assert [d.turns_kept for d in decisions][: folds[0]] == list(range(folds[0]))


async def test_the_summary_is_updated_only_at_folds(tmp_path) -> None:
    settings, model, results = await conversation(tmp_path, "cache_stable")
    summaries = prompt_calls(model, SUMMARY_HEAD)
    assert len(summaries) == 2  # after turns 9 and 14, for the folds of turns 10 and 15
    shown = [r.trace.budget.summary for r in results]
    assert shown[:9] == [0] * 9 and all(shown[9:])
    answers = prompt_calls(model, settings.prompt.system_prompt)
    texts = [
        c.messages[1].content.split(SUMMARY_END, 1)[0] if c.messages[1].content.startswith(SUMMARY_HEADING) else None
        for c in answers
    ]
    changes = [i for i in range(1, len(texts)) if texts[i] != texts[i - 1]]
    assert changes == [9, 14]


async def test_today_s_layout_stays_measurable(tmp_path) -> None:
    settings, model, results = await conversation(tmp_path, "sliding")
    answers = prompt_calls(model, settings.prompt.system_prompt)
    assert len(prompt_calls(model, SUMMARY_HEAD)) == len(QUESTIONS) - 8  # a summary update every turn past 8
    assert answers[-1].messages[0].content.startswith(f"{settings.prompt.system_prompt}{SUMMARY_LABEL}")
    assert [r.trace.budget.turns_kept for r in results][8:] == [8] * (len(QUESTIONS) - 8)
    assert [r.trace.budget.turns_folded for r in results][9:] == [1] * (len(QUESTIONS) - 9)


async def test_the_query_stage_sees_the_same_conversation_in_either_layout(tmp_path) -> None:
    _, stable, stable_results = await conversation(tmp_path, "cache_stable")
    _, sliding, sliding_results = await conversation(tmp_path, "sliding")
    stable_rewrites = [c.messages for c in prompt_calls(stable, REWRITE_INSTRUCTIONS)]
    sliding_rewrites = [c.messages for c in prompt_calls(sliding, REWRITE_INSTRUCTIONS)]
    # every follow-up that does not stand alone asks for a rewrite (one that stands alone is its own query)
    rewritten = [r for r in stable_results[1:] if r.trace.stage("query").detail != "stands alone: no rewrite needed"]
    assert len(stable_rewrites) == len(rewritten) >= 5
    assert stable_rewrites == sliding_rewrites
    assert [r.trace.query for r in stable_results] == [r.trace.query for r in sliding_results]
    assert [[p.id for p in r.trace.retrieved] for r in stable_results] == [
        [p.id for p in r.trace.retrieved] for r in sliding_results
    ]


async def test_follow_ups_report_cached_prompt_tokens_in_the_trace_and_the_counter(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, chat_model="fake", embedder="hashing", similarity_threshold=0.0)
    model = FakeChatModel(default=Router())
    components = build_components(settings, model=model)
    components.ingestor.run([SAMPLE_DOCS])
    engine = components.engine
    try:
        conversation_id = (await components.conversations.create("local")).id
        referring = [QUESTIONS[0], "And on ARM?", "How do I upgrade it?"]  # the follow-ups need a rewrite
        results = [await engine.ask(TurnRequest(q, conversation_id=conversation_id)) for q in referring]
    finally:
        await engine.aclose()
        components.database.close()
    calls = [call for result in results for call in result.trace.calls]
    assert [c.purpose for c in calls] == ["answer", "rewrite", "answer", "rewrite", "answer"]
    follow_up = results[2].trace.calls[-1]
    assert follow_up.prompt_tokens > follow_up.cached_tokens > 0  # the fake's cache: the previous prompts
    cached = sum(c.cached_tokens for c in calls if c.purpose == "answer")
    uncached = sum(c.evaluated_tokens for c in calls if c.purpose == "answer")
    metrics = engine.metrics
    assert metrics.value("anaphora_model_prompt_tokens_total", purpose="answer", cached="true") == cached
    assert metrics.value("anaphora_model_prompt_tokens_total", purpose="answer", cached="false") == uncached
    assert metrics.value("anaphora_model_prompt_tokens_total", purpose="rewrite", cached="false") > 0
