"""Chat-model backends by name: built-ins are registered exactly like third-party ones.

A spec is ``scheme`` or ``scheme:argument``. Built-ins: ``embedded``, ``fake`` (``fake:SECONDS`` paces its streamed
words), ``gguf:PATH`` (a bare path ending in ``.gguf`` works too), ``openai:MODEL`` and ``anthropic:MODEL``.
Packages add schemes through the ``anaphora.chat_models`` entry-point group, where the built-ins are declared too
(:data:`anaphora.backends.CHAT_MODELS`); each entry point is a factory ``(argument: str, settings: ModelSettings)
-> ChatModel``, given ``settings.models``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from anaphora.backends import CHAT_MODELS
from anaphora.errors import ConfigurationError
from anaphora.models.base import ChatModel
from anaphora.settings import ModelSettings

Factory = Callable[[str, ModelSettings], ChatModel]


def _llamacpp(path: str | Path, settings: ModelSettings, **identity: Any) -> ChatModel:
    """An in-process GGUF model with the settings every llama.cpp spec shares; ``identity``: name, capabilities."""
    from anaphora.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel(
        path,
        context_window=settings.context_window,
        threads=settings.model_threads,
        state_cache_bytes=settings.model_state_cache_mb * 2**20,
        flash_attention=settings.model_flash_attention,
        weight_repacking=settings.model_weight_repacking,
        **identity,
    )


def embedded(argument: str, settings: ModelSettings) -> ChatModel:
    from anaphora.models.llamacpp import embedded_gguf_path

    return _llamacpp(
        embedded_gguf_path(),
        settings,
        name="smollm2-135m-instruct",
        reliable_answers=False,  # 135M parameters: its turns are quoted from the passages
    )


def gguf(argument: str, settings: ModelSettings) -> ChatModel:
    if not argument:
        raise ConfigurationError("'gguf:' needs a file path", hint="use gguf:/path/to/model.gguf")
    return _llamacpp(argument, settings)


def openai(argument: str, settings: ModelSettings) -> ChatModel:
    """An OpenAI-compatible endpoint, with the context length its server reports for the model (asked once, here;
    a server that is down or reports none leaves ``context_window`` in charge)."""
    from anaphora.models.openai_compat import OpenAICompatibleChatModel
    from anaphora.models.served_context import PROBE_TIMEOUT_S, served_context_tokens

    if not argument:
        raise ConfigurationError("'openai:' needs a model name", hint="use openai:MODEL, e.g. openai:gpt-4o-mini")
    key = settings.openai_api_key.get_secret_value()
    reported = served_context_tokens(
        settings.openai_base_url, argument, api_key=key, timeout_s=min(settings.model_timeout_s, PROBE_TIMEOUT_S)
    )
    return OpenAICompatibleChatModel(
        argument,
        base_url=settings.openai_base_url,
        api_key=key,
        timeout_s=settings.model_timeout_s,
        context_tokens=reported,
    )


def anthropic(argument: str, settings: ModelSettings) -> ChatModel:
    from anaphora.models.anthropic import DEFAULT_BASE_URL, AnthropicChatModel

    if not argument:
        raise ConfigurationError(
            "'anthropic:' needs a model name", hint="use anthropic:MODEL, e.g. anthropic:claude-sonnet-4-5"
        )
    key = settings.anthropic_api_key.get_secret_value()
    if not key and settings.anthropic_base_url.rstrip("/") == DEFAULT_BASE_URL:
        raise ConfigurationError(
            "the Anthropic chat model needs an API key", hint="set ANAPHORA_ANTHROPIC_API_KEY (or anthropic_api_key)"
        )
    return AnthropicChatModel(
        argument, api_key=key, base_url=settings.anthropic_base_url, timeout_s=settings.model_timeout_s
    )


def fake(argument: str, settings: ModelSettings) -> ChatModel:
    """``fake``, or ``fake:SECONDS``: streamed answers come a word at a time, SECONDS apart (slow turns on demand)."""
    from anaphora.models.fake import FakeChatModel

    try:
        pause = float(argument) if argument else 0.0
    except ValueError:
        pause = -1.0
    if not 0 <= pause <= 60:
        raise ConfigurationError(
            f"'fake:{argument}' needs a pause between streamed words in seconds, from 0 to 60",
            hint="use 'fake' or e.g. 'fake:0.05'",
        )
    return FakeChatModel(token_delay_s=pause)


BUILTIN_CHAT_MODELS = tuple(CHAT_MODELS.builtins)  # the schemes declared in pyproject.toml


def available_chat_models() -> dict[str, Factory]:
    """Every registered scheme's factory (each imported: listing them is not free)."""
    return {name: entry.load() for name, entry in CHAT_MODELS.available().items()}


def chat_model_scheme(spec: str, schemes: Collection[str] | None = None) -> tuple[str, str]:
    """``(scheme, argument)`` of a spec. A bare path ending in ``.gguf`` is a ``gguf`` file, unless the text before
    its first colon is a registered scheme ("openai:x.gguf" keeps its scheme); ``schemes``: the registered ones
    (looked up only for such a spec: reading the entry points takes milliseconds)."""
    spec = spec.strip()
    scheme, _, argument = spec.partition(":")
    if spec.endswith(".gguf") and scheme not in (CHAT_MODELS.available() if schemes is None else schemes):
        return "gguf", spec
    return scheme, argument


def load_chat_model(settings: ModelSettings, spec: str | None = None) -> ChatModel:
    spec = (spec or settings.chat_model).strip()
    entries = CHAT_MODELS.available()
    scheme, argument = chat_model_scheme(spec, entries)
    return CHAT_MODELS.factory(scheme, spec, entries)(argument, settings)
