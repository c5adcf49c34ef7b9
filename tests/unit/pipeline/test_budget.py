"""PromptBudget.plan: one token budget for the whole generation prompt; and the engine keeping to it over 200 turns."""

from __future__ import annotations

import random

import pytest

from anaphora import FakeChatModel, Settings
from anaphora.app import build_components
from anaphora.errors import InputError
from anaphora.models.fake import echo_first_context
from anaphora.pipeline.budget import (
    MESSAGE_OVERHEAD,
    HistoryWindow,
    PromptBudget,
    PromptLimits,
    PromptParts,
    truncate_to_tokens,
)
from anaphora.pipeline.engine import TurnRequest
from anaphora.pipeline.prompt import SUMMARY_END, SUMMARY_HEADING, summary_label
from anaphora.pipeline.rewrite import REWRITE_INSTRUCTIONS
from anaphora.pipeline.summary import SUMMARY_INSTRUCTIONS
from anaphora.store import NewTurn
from anaphora.types import Message, Passage
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit


def count(text: str) -> int:
    return len(text.split())


def cost(text: str) -> int:
    return count(text) + MESSAGE_OVERHEAD


def passage(i: int, n: int) -> Passage:
    return Passage(id=f"doc.md#{i}", text=" ".join(f"p{i}w{j}" for j in range(n)))


def passage_cost(p: Passage) -> int:
    return count(p.text) + 2


def turns(n: int, words: int = 5, *, start: int = 0) -> list[Message]:
    """``n`` user/assistant pairs; each message has ``words`` words, so a turn costs 2 * (words + 4)."""
    messages: list[Message] = []
    for i in range(start, start + n):
        messages.append(Message(role="user", content=" ".join([f"u{i}"] * words)))
        messages.append(Message(role="assistant", content=" ".join([f"a{i}"] * words)))
    return messages


SYSTEM = " ".join(["system"] * 10)  # costs 14
QUESTION = "what is the memory limit"  # costs 9


def plan(**overrides):
    arguments = dict(
        count=count,
        budget=1000,
        history_budget=1000,
        max_turns=8,
        system=SYSTEM,
        summary="",
        history=[],
        passages=[],
        question=QUESTION,
        passage_text=lambda p: p.text,
    )
    arguments.update(overrides)
    return plan_prompt(**arguments)


def plan_prompt(
    *, count, passage_text, excerpt_text=None, budget, history_budget, memory_budget=0, answer_reserve=0, **parts
):
    """The budget's three values (parts, limits, window) from one set of keyword arguments, for the tests."""
    window = {k: parts.pop(k) for k in list(parts) if k in WINDOW_FIELDS}
    if "history_excerpts" in parts:
        window["excerpts"] = parts.pop("history_excerpts")
    limits = PromptLimits(budget, history_budget, memory_budget, answer_reserve)
    return PromptBudget(count, passage_text, excerpt_text).plan(PromptParts(**parts), limits, HistoryWindow(**window))


WINDOW_FIELDS = ("history", "max_turns", "layout", "turns_folded", "floor", "previous_start")


def check_invariants(result, *, budget, history_budget, max_turns, history, passages, summary) -> None:
    decision = result.decision
    assert decision.used <= budget
    # the numbers add up, and they are the costs of what was actually kept
    assert decision.used == (
        decision.system + decision.summary + decision.question + decision.passages + decision.history
    )
    assert decision.system == cost(SYSTEM)
    assert decision.question == cost(QUESTION)
    assert decision.passages == sum(passage_cost(p) for p in result.passages)
    assert decision.history == sum(cost(m.content) for m in result.history)
    assert decision.summary == (cost(result.summary) if result.summary else 0)
    # passages: the best-ranked ones, in order
    assert result.passages == list(passages[: len(result.passages)])
    assert decision.passages_kept + decision.passages_dropped == len(passages)
    # history: the newest whole turns, in order, at most max_turns
    kept = len(result.history)
    assert kept % 2 == 0
    assert result.history == (list(history[-kept:]) if kept else [])
    assert decision.turns_kept == kept // 2 <= max_turns
    assert decision.turns_available == len(history) // 2
    assert decision.turns_beyond_window + decision.turns_evicted_for_budget + decision.turns_kept == len(history) // 2
    # history and summary keep to their own budget, the summary to half of the history room
    room = min(budget - decision.system - decision.question - decision.passages, history_budget)
    assert decision.history + decision.summary <= room
    assert decision.summary <= room // 2
    if summary and not decision.summary_truncated:
        assert result.summary == summary


@pytest.mark.parametrize("seed", range(40))
def test_random_plans_never_exceed_the_budget(seed: int) -> None:
    rng = random.Random(seed)
    budget = rng.randint(40, 1500)
    history_budget = rng.randint(10, 1200)
    max_turns = rng.randint(1, 12)
    history: list[Message] = []
    for i in range(rng.randint(0, 30)):
        history += turns(1, rng.randint(1, 40), start=i)
    passages = [passage(i, rng.randint(1, 300)) for i in range(rng.randint(0, 6))]
    summary = " ".join(f"s{i}" for i in range(rng.choice([0, 5, 50, 400])))
    result = plan(
        budget=budget,
        history_budget=history_budget,
        max_turns=max_turns,
        history=history,
        passages=passages,
        summary=summary,
    )
    check_invariants(
        result,
        budget=budget,
        history_budget=history_budget,
        max_turns=max_turns,
        history=history,
        passages=passages,
        summary=summary,
    )


def test_everything_fits_when_there_is_room() -> None:
    history = turns(3)
    passages = [passage(0, 50), passage(1, 50)]
    result = plan(history=history, passages=passages, summary="earlier we talked about buffers")
    d = result.decision
    assert result.history == history and result.passages == passages
    assert result.summary == "earlier we talked about buffers"
    assert (d.turns_kept, d.turns_evicted_for_budget, d.turns_beyond_window, d.passages_dropped) == (3, 0, 0, 0)
    assert d.used == 14 + 9 + 2 * 52 + 3 * 18 + cost("earlier we talked about buffers")
    assert not d.summary_truncated


def test_history_is_evicted_before_any_passage() -> None:
    history = turns(6)  # 6 x 18 tokens
    passages = [passage(i, 100) for i in range(3)]  # 3 x 102 tokens
    budget = 14 + 9 + 306 + 40  # room for two turns of history
    result = plan(budget=budget, history=history, passages=passages)
    check_invariants(
        result, budget=budget, history_budget=1000, max_turns=8, history=history, passages=passages, summary=""
    )
    assert result.passages == passages
    assert result.decision.turns_kept == 2
    assert result.decision.turns_evicted_for_budget == 4


def test_passages_are_kept_even_when_no_history_fits() -> None:
    history = turns(4)
    passages = [passage(i, 100) for i in range(3)]
    budget = 14 + 9 + 306 + 17  # one token short of a turn
    result = plan(budget=budget, history=history, passages=passages)
    assert result.passages == passages
    assert result.history == []
    assert result.decision.used == 14 + 9 + 306


def test_oldest_turns_are_evicted_first() -> None:
    history = turns(6)
    budget = 14 + 9 + 3 * 18 + 10  # three and a half turns
    result = plan(budget=budget, history=history)
    assert result.history == history[-6:]  # turns 3, 4, 5
    assert [m.content.split()[0] for m in result.history] == ["u3", "a3", "u4", "a4", "u5", "a5"]
    assert result.decision.turns_evicted_for_budget == 3
    assert result.decision.used == budget - 10


def test_a_big_recent_turn_is_never_skipped_for_older_ones() -> None:
    history = turns(3, 2) + turns(1, 100, start=3)  # the newest turn is huge
    budget = 14 + 9 + 100
    result = plan(budget=budget, history=history)
    assert result.history == []  # no gap: older turns are not shown without the newer one
    assert result.decision.turns_evicted_for_budget == 4


def test_at_most_max_turns_are_verbatim() -> None:
    history = turns(10)
    result = plan(history=history, max_turns=4)
    assert result.history == history[-8:]
    d = result.decision
    assert (d.turns_available, d.turns_kept, d.turns_beyond_window, d.turns_evicted_for_budget) == (10, 4, 6, 0)


def test_history_budget_is_respected() -> None:
    history = turns(10)
    result = plan(history=history, history_budget=60, summary=" ".join(["s"] * 20))
    d = result.decision
    assert d.summary + d.history <= 60
    assert d.summary == 24
    assert d.turns_kept == 2  # 60 - 24 = 36 = two turns of 18


def test_oversize_question_raises_input_error() -> None:
    question = " ".join(["word"] * 200)
    with pytest.raises(InputError) as info:
        plan(budget=100, question=question, history=turns(2), passages=[passage(0, 10)])
    assert "too long" in info.value.message
    assert info.value.hint


def test_question_that_exactly_fits_leaves_no_room_for_anything_else() -> None:
    budget = cost(SYSTEM) + cost(QUESTION)
    result = plan(budget=budget, history=turns(2), passages=[passage(0, 1)], summary="a summary")
    d = result.decision
    assert d.used == budget
    assert result.passages == [] and result.history == [] and result.summary == ""
    assert d.passages_dropped == 1


def test_passages_that_alone_overflow_are_dropped_lowest_ranked_first() -> None:
    passages = [passage(i, 100) for i in range(5)]  # 102 each
    budget = 14 + 9 + 3 * 102 + 50
    result = plan(budget=budget, passages=passages, history=turns(2))
    assert result.passages == passages[:3]
    assert result.decision.passages_kept == 3 and result.decision.passages_dropped == 2
    assert result.decision.used <= budget


def test_a_lower_ranked_passage_never_displaces_a_higher_ranked_one() -> None:
    passages = [passage(0, 10), passage(1, 500), passage(2, 10)]
    result = plan(budget=200, passages=passages)
    assert result.passages == passages[:1]
    assert result.decision.passages_dropped == 2


def test_summary_is_truncated_to_half_of_the_history_room() -> None:
    summary = " ".join(f"s{i}" for i in range(400))
    history_budget = 100
    result = plan(summary=summary, history_budget=history_budget, history=turns(10))
    d = result.decision
    assert d.summary_truncated
    assert 0 < d.summary <= history_budget // 2
    assert summary.startswith(result.summary)
    assert d.summary == cost(result.summary)
    assert d.summary + d.history <= history_budget
    assert d.turns_kept == 2  # the other half holds the newest turns


def test_summary_truncation_uses_the_remaining_room_when_smaller_than_history_budget() -> None:
    summary = " ".join(f"s{i}" for i in range(400))
    passages = [passage(0, 100)]
    budget = 14 + 9 + 102 + 60  # history room is 60 although history_budget is 1000
    result = plan(budget=budget, summary=summary, passages=passages)
    assert result.decision.summary <= 30
    assert result.decision.used <= budget


def test_truncate_to_tokens() -> None:
    text = "one two three four five"
    assert truncate_to_tokens(text, 10, count) == text
    assert truncate_to_tokens(text, 3, count) == "one two three"
    assert truncate_to_tokens(text, 0, count) == ""


def test_truncate_to_tokens_keeps_whole_sentences_when_one_fits() -> None:
    text = "Kestrel was installed with Helm. The memory limit was raised to one gigabyte."
    assert truncate_to_tokens(text, 8, count) == "Kestrel was installed with Helm."


# --- end to end: a long conversation through the engine -----------------------------------------------------------

SUMMARY_TEXT = " ".join(f"Earlier point {i} concerned Kestrel buffers and limits." for i in range(80))


def router(messages) -> str:
    first = messages[0].content
    if first == SUMMARY_INSTRUCTIONS.format(words=first.split("at most ")[-1].split()[0]):
        return SUMMARY_TEXT
    if first == REWRITE_INSTRUCTIONS:
        return messages[-1].content.rsplit("Last message: ", 1)[-1].removesuffix("\nQuery:")
    return echo_first_context(messages)


def rendered_tokens(model: FakeChatModel, messages) -> int:
    return sum(model.count_tokens(m.content) + MESSAGE_OVERHEAD for m in messages)


async def test_two_hundred_turns_stay_within_the_budget(tmp_path) -> None:
    settings = Settings(
        similarity_threshold=0.0,
        data_dir=tmp_path,
        chat_model="fake",
        embedder="hashing",
        context_window=2048,
        answer_max_tokens=256,
    )
    fake = FakeChatModel(default=router)
    components = build_components(settings, model=fake)
    engine, store = components.engine, components.conversations
    try:
        components.ingestor.run([SAMPLE_DOCS])
        conversation = (await store.create("local")).id
        rng = random.Random(7)
        for i in range(196):
            question = f"Stored question {i} about Kestrel " + " ".join(["buffers"] * rng.randint(1, 30)) + "?"
            answer = f"Stored answer {i}. " + " ".join(["The agent keeps a disk spool."] * rng.randint(1, 40))
            await store.append_turn("local", conversation, NewTurn(question=question, answer=answer))
        budget = settings.models.context_window - settings.answers.answer_max_tokens
        evicted = 0
        questions = [
            "How do I set memory limits for the Kestrel agent?",
            "And on ARM?",
            "What about the disk buffer?",
            "How do I upgrade it?",
        ]
        for number, question in enumerate(questions):
            result = await engine.ask(TurnRequest(question, conversation_id=conversation))
            await engine.drain()
            decision = result.trace.budget
            assert decision is not None
            assert decision.budget == budget
            assert decision.used <= budget
            assert result.trace.prompt_tokens == decision.used
            evicted += decision.turns_evicted_for_budget
            answer_call = [c for c in fake.calls if c.messages[0].content.startswith(settings.prompt.system_prompt)][-1]
            messages = answer_call.messages
            assert messages[-1].role == "user"
            assert messages[-1].content.endswith(f"Question: {question}")
            assert (
                messages[0].content == settings.prompt.system_prompt
            )  # the cache-stable layout: the system prompt alone
            shown = [m.content for m in messages[1:-1] if m.role == "user"]
            assert len(shown) <= engine.window.max_turns
            assert len(shown) == decision.turns_kept
            if number:  # a summary of the turns that left the window opens the conversation from turn 2 on
                assert messages[1].content.startswith(f"{SUMMARY_HEADING}Earlier point 0")
                if shown:
                    shown[0] = shown[0].split(SUMMARY_END, 1)[1]
            # the turns shown are the most recent ones, oldest first, ending with the previous turn
            stored = (await store.turns("local", conversation, last=len(shown) + 1))[:-1]  # [-1] is this turn
            assert shown == [t.question for t in stored]
            assert result.turn_index == 196 + number
        assert evicted > 0  # the budget, not only the turn window, did the evicting
        assert len(await store.turns("local", conversation)) == 200
    finally:
        await engine.drain()
        components.database.close()


async def test_rendered_prompt_stays_within_the_budget(tmp_path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        chat_model="fake",
        embedder="hashing",
        context_window=2048,
        answer_max_tokens=256,
        rewriter="off",
        memory_recall_k=0,  # the probe turn must not be shown as a memory in the measured one
    )
    fake = FakeChatModel(default="The documents say so.")
    components = build_components(settings, model=fake)
    engine, store = components.engine, components.conversations
    question = "How do I set memory limits for the Kestrel agent?"
    try:
        components.ingestor.run([SAMPLE_DOCS])
        probe = (await engine.ask(TurnRequest(question, conversation_id=(await store.create("local")).id))).trace
        room = probe.budget.budget - probe.budget.used
        summary = "Earlier the user asked about Kestrel buffers."
        summary_cost = fake.count_tokens(summary_label(settings.prompt.prompt_layout) + summary) + MESSAGE_OVERHEAD
        filler = room - summary_cost - (1 + MESSAGE_OVERHEAD) - MESSAGE_OVERHEAD
        assert filler > 0
        conversation = (await store.create("local")).id
        await store.append_turn("local", conversation, NewTurn(question="hello", answer="hello"))
        await store.append_turn("local", conversation, NewTurn(question="hi", answer="a" * (4 * filler)))
        await store.save_summary("local", conversation, 1, summary)  # the first turn: not shown verbatim again
        result = await engine.ask(TurnRequest(question, conversation_id=conversation))
        assert result.trace.budget.used == result.trace.budget.budget  # planned to fill the budget exactly
        assert result.trace.budget.turns_kept == 1 and result.trace.budget.summary > 0
        assert rendered_tokens(fake, fake.calls[-1].messages) <= result.trace.budget.budget
    finally:
        await engine.drain()
        components.database.close()


async def test_summary_call_fits_the_context_window(tmp_path) -> None:
    settings = Settings(
        data_dir=tmp_path, chat_model="fake", embedder="hashing", context_window=2048, answer_max_tokens=256
    )
    fake = FakeChatModel(default=router)
    components = build_components(settings, model=fake)
    engine, store = components.engine, components.conversations
    try:
        components.ingestor.run([SAMPLE_DOCS])
        conversation = (await store.create("local")).id
        for i in range(60):
            answer = f"Stored answer {i}. " + " ".join(["The agent keeps a disk spool."] * 15)
            await store.append_turn("local", conversation, NewTurn(question=f"Question {i}?", answer=answer))
        await engine.ask(TurnRequest("How do I set memory limits for the Kestrel agent?", conversation_id=conversation))
        await engine.drain()
        summary_calls = [c for c in fake.calls if c.messages[0].content.startswith(SUMMARY_INSTRUCTIONS[:40])]
        assert summary_calls
        for call in summary_calls:
            assert (
                rendered_tokens(fake, call.messages) + settings.prompt.summary_max_tokens
                <= settings.models.context_window
            )
    finally:
        await engine.drain()
        components.database.close()
