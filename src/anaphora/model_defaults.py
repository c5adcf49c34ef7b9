"""Settings left unset (or 'auto') resolved from what the chat model declares (:class:`~anaphora.models.base.
ModelCapabilities`), never from its name: the answer mode, the query rewriter, history excerpts, the verbatim
window, model-written memory facts and the context the prompt must fit. The one place these defaults are decided;
:func:`anaphora.app.build_stages` reads them."""

from __future__ import annotations

from typing import Literal

from anaphora.errors import ConfigurationError
from anaphora.models.base import ModelCapabilities
from anaphora.pipeline.check import AnswerMode
from anaphora.pipeline.window import WindowPolicy
from anaphora.settings import (
    AnswerSettings,
    IngestSettings,
    MemorySettings,
    ModelSettings,
    PromptSettings,
    RetrievalSettings,
)

RewriterChoice = Literal["analysis", "model", "expansion", "off"]
CACHED_WINDOW = (16, 8)  # a model whose provider caches prefixes: a longer window folds less often (prefix 0.89)
LOCAL_WINDOW = (8, 4)  # the brief's window (at most 8 verbatim turns, folding to 4)


def answer_mode(settings: AnswerSettings, capabilities: ModelCapabilities) -> AnswerMode:
    """``answer_mode``, or 'extractive' for a model whose answers are not reliable, else 'auto' (measured:
    docs/benchmarks.md, grounded answers)."""
    if settings.answer_mode is not None:
        return settings.answer_mode
    return "auto" if capabilities.reliable_answers else "extractive"


def context_tokens(settings: ModelSettings, capabilities: ModelCapabilities) -> int:
    """The context every prompt must fit: ``context_window``, or less where the model declares less (an
    OpenAI-compatible server that reports a shorter context than the setting refuses anything longer)."""
    declared = capabilities.context_tokens
    return min(declared, settings.context_window) if declared else settings.context_window


def embeds_answer_units(settings: IngestSettings, mode: AnswerMode) -> bool:
    """``embed_answer_units``, or whether every answer is quoted (then every quoted passage's units are judged)."""
    if settings.embed_answer_units is not None:
        return settings.embed_answer_units
    return mode == "extractive"


def query_rewriter(settings: RetrievalSettings, capabilities: ModelCapabilities) -> RewriterChoice:
    """``rewriter``, or the model-free expansion for a model whose answers are not reliable (the embedded
    SmolLM2-135M: its rewrites retrieve no better and cost a call per follow-up, docs/benchmarks.md, issue 23),
    else a model rewrite."""
    if settings.rewriter is not None:
        return settings.rewriter
    return "model" if capabilities.reliable_answers else "expansion"


def uses_model_facts(settings: MemorySettings, capabilities: ModelCapabilities) -> bool:
    """``memory_model_facts``, with 'auto' on for a model that may be asked for facts."""
    if settings.memory_model_facts != "auto":
        return settings.memory_model_facts == "on"
    return capabilities.extracts_facts


def shows_history_excerpts(settings: PromptSettings, capabilities: ModelCapabilities) -> bool:
    """``history_excerpts`` (``cache_stable`` only), with 'auto' on unless the model runs in this process."""
    if settings.prompt_layout != "cache_stable" or settings.history_excerpts == "off":
        return False
    return settings.history_excerpts == "on" or not capabilities.in_process


def window_policy(settings: PromptSettings, capabilities: ModelCapabilities) -> WindowPolicy:
    """The verbatim window: ``history_turns`` / ``history_min_turns``, unset ones by whether the model's provider
    caches prompt prefixes (16 folding to 8) or not (8 folding to 4)."""
    default_max, default_min = CACHED_WINDOW if capabilities.prompt_caching else LOCAL_WINDOW
    max_turns = settings.history_turns if settings.history_turns is not None else default_max
    min_turns = settings.history_min_turns if settings.history_min_turns is not None else min(default_min, max_turns)
    if min_turns > max_turns:
        raise ConfigurationError(
            f"history_min_turns ({min_turns}) cannot exceed history_turns ({max_turns})",
            hint="lower ANAPHORA_HISTORY_MIN_TURNS or raise ANAPHORA_HISTORY_TURNS",
        )
    return WindowPolicy(
        layout=settings.prompt_layout,
        max_turns=max_turns,
        min_turns=min_turns,
        excerpts=shows_history_excerpts(settings, capabilities),
        summary=settings.summary,
    )
