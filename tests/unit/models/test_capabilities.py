"""Model capabilities are declared by each backend, and the defaults that depend on the chat model are read from
them (anaphora.model_defaults), never from the model's name. API models (prompt caching) get history excerpts and
a 16-turn window folding to 8 without any setting; in-process models keep 8 folding to 4 without excerpts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from anaphora import FakeChatModel, Settings
from anaphora.app import build_components
from anaphora.model_defaults import answer_mode, shows_history_excerpts, uses_model_facts, window_policy
from anaphora.models import ModelCapabilities, load_chat_model
from anaphora.pipeline.engine import TurnRequest
from anaphora.pipeline.stages import Budget
from anaphora.pipeline.window import WindowPolicy
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

IN_PROCESS = ModelCapabilities(in_process=True, context_tokens=8192)
SMALL = ModelCapabilities(in_process=True, reliable_answers=False, extracts_facts=False, context_tokens=8192)
API = ModelCapabilities(prompt_caching=True)


def declared(spec: str, **settings) -> ModelCapabilities:
    model = load_chat_model(Settings(chat_model=spec, **settings).models)
    try:
        return model.capabilities
    finally:
        asyncio.run(model.aclose())


def test_every_backend_declares_its_capabilities() -> None:
    embedded = declared("embedded")
    assert embedded.in_process and not embedded.reliable_answers and not embedded.extracts_facts
    assert embedded.context_tokens == Settings().models.context_window
    openai = declared("openai:gpt-4o-mini")
    assert openai.prompt_caching and not openai.in_process and openai.reliable_answers
    assert not FakeChatModel().capabilities.prompt_caching and not FakeChatModel().capabilities.extracts_facts
    pytest.importorskip("anthropic")
    assert declared("anthropic:claude-sonnet-4-5", anthropic_api_key="sk-test").prompt_caching


@pytest.mark.parametrize(
    ("capabilities", "setting", "layout", "shown"),
    [
        (SMALL, "auto", "cache_stable", False),  # computes every context token in this process
        (IN_PROCESS, "auto", "cache_stable", False),
        (API, "auto", "cache_stable", True),  # a provider's cache serves them cheaply
        (FakeChatModel().capabilities, "auto", "cache_stable", True),
        (SMALL, "on", "cache_stable", True),
        (API, "off", "cache_stable", False),
        (API, "on", "sliding", False),  # only the cache-stable layout keeps them
    ],
)
def test_history_excerpts_auto_follows_where_the_model_runs(capabilities, setting, layout, shown) -> None:
    settings = Settings(history_excerpts=setting, prompt_layout=layout)
    assert shows_history_excerpts(settings.prompt, capabilities) is shown


def test_the_answer_mode_and_model_facts_follow_what_the_model_declares() -> None:
    assert answer_mode(Settings().answers, SMALL) == "extractive"
    assert answer_mode(Settings().answers, API) == answer_mode(Settings().answers, IN_PROCESS) == "auto"
    assert answer_mode(Settings(answer_mode="generate").answers, SMALL) == "generate"
    assert not uses_model_facts(Settings().memory, SMALL)
    assert not uses_model_facts(Settings().memory, FakeChatModel().capabilities)
    assert uses_model_facts(Settings().memory, API) and uses_model_facts(Settings().memory, IN_PROCESS)
    assert not uses_model_facts(Settings(memory_model_facts="off").memory, API)
    assert uses_model_facts(Settings(memory_model_facts="on").memory, SMALL)


def test_the_window_defaults_follow_prompt_caching() -> None:
    assert window_policy(Settings().prompt, API) == WindowPolicy("cache_stable", 16, 8, excerpts=True)
    assert window_policy(Settings().prompt, IN_PROCESS) == WindowPolicy("cache_stable", 8, 4, excerpts=False)
    assert window_policy(Settings(history_turns=12).prompt, API).min_turns == 8  # what is set wins, the rest defaults
    assert window_policy(Settings(history_turns=6).prompt, IN_PROCESS).min_turns == 4
    assert window_policy(Settings(history_turns=6).prompt, API).min_turns == 6  # at most history_turns


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"])
def test_an_api_model_gets_excerpts_and_a_16_turn_window_folding_to_8_without_any_setting(
    tmp_path: Path, spec: str
) -> None:
    if spec.startswith("anthropic"):
        pytest.importorskip("anthropic")
    settings = Settings(data_dir=tmp_path / "data", chat_model=spec, embedder="hashing", anthropic_api_key="sk-x")
    assert settings.prompt.history_turns is None and settings.prompt.history_excerpts == "auto"  # nothing set
    components = build_components(settings)
    try:
        engine = components.engine
        budget = next(s for s in engine.stages if isinstance(s, Budget))
        assert engine.window == budget.window == WindowPolicy("cache_stable", 16, 8, excerpts=True)
    finally:
        asyncio.run(components.aclose())


def test_a_prompt_caching_model_shows_16_turns_then_folds_to_8(tmp_path: Path) -> None:
    """Through the engine: the 17th turn's prompt shows the 16 before it; the 18th shows 8 (the rest folded)."""
    model = FakeChatModel(capabilities=API)
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        context_window=65536,
        history_budget_tokens=60000,  # room enough that only the window rule folds
    )
    components = build_components(settings, model=model)
    components.ingestor.run([SAMPLE_DOCS])

    async def conversation() -> list[int]:
        conversation_id = (await components.conversations.create("local")).id
        kept = []
        for n in range(18):
            result = await components.engine.ask(
                TurnRequest(f"question {n} on Kestrel", conversation_id=conversation_id)
            )
            kept.append(result.trace.budget.turns_kept)
        await components.engine.aclose()
        return kept

    try:
        kept = asyncio.run(conversation())
    finally:
        components.database.close()
    assert kept[16] == 16 and kept[17] == 8
    answers = [h for h in model.history if h[0].content.startswith(settings.prompt.system_prompt)]  # not rewrites
    assert answers[16][1].content.count("<<<CONTEXT>>>") == 1  # each earlier turn shows its excerpts
