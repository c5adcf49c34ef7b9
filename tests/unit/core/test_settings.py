"""Settings: brief defaults, precedence (constructor > ANAPHORA_* > TOML > defaults), TOML, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora.errors import ConfigurationError
from anaphora.models import FakeChatModel, load_chat_model
from anaphora.settings import (
    DEFAULT_SYSTEM_PROMPT,
    GROUP_OF,
    GROUPS,
    RetrievalSettings,
    Settings,
    load_settings,
    reference_markdown,
)

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def cwd(isolated_env: Path) -> Path:
    """Each test runs in an empty folder with no ANAPHORA_* variables set."""
    return isolated_env


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- defaults -----------------------------------------------------------------------------------------------


def test_defaults_match_the_brief() -> None:
    s = load_settings()
    assert s.retrieval.candidates == 25
    assert s.retrieval.top_k == 5
    assert s.prompt.history_turns is None  # by the chat model's capabilities: 8 in process (tests/unit/models)
    assert s.models.chat_model == "embedded"
    assert s.models.embedder == "minilm"
    assert (
        s.retrieval.fusion,
        s.retrieval.fusion_normalisation,
        s.retrieval.bm25_weight,
        s.retrieval.dense_weight,
    ) == ("combsum", "minmax", 0.5, 1.0)
    assert s.ingest.chunk_overlap < s.ingest.chunk_tokens
    assert s.models.openai_api_key.get_secret_value() == ""
    assert s.config_file is None
    assert s.prompt.system_prompt == DEFAULT_SYSTEM_PROMPT


def test_default_data_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert load_settings().data_dir == tmp_path / "xdg" / "anaphora"


def test_data_dir_expands_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_settings(data_dir="~/store").data_dir == tmp_path / "store"


def test_none_overrides_are_ignored() -> None:
    assert load_settings(top_k=None, chat_model=None).retrieval.top_k == 5


def test_api_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_OPENAI_API_KEY", "sk-very-secret")
    s = load_settings()
    assert s.models.openai_api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in repr(s)


# --- precedence ---------------------------------------------------------------------------------------------


def test_env_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_TOP_K", "3")
    monkeypatch.setenv("ANAPHORA_CANDIDATES", "40")
    monkeypatch.setenv("ANAPHORA_CHAT_MODEL", "openai:gpt-4o-mini")
    s = load_settings()
    assert (s.retrieval.top_k, s.retrieval.candidates, s.models.chat_model) == (3, 40, "openai:gpt-4o-mini")


def test_constructor_beats_env_beats_toml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = write(tmp_path / "conf.toml", "top_k = 2\ncandidates = 30\nhistory_turns = 5\nrrf_k = 11\n")
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(config))
    monkeypatch.setenv("ANAPHORA_TOP_K", "4")
    monkeypatch.setenv("ANAPHORA_HISTORY_TURNS", "6")
    s = load_settings(top_k=7)
    assert s.retrieval.top_k == 7  # constructor over env and file
    assert s.prompt.history_turns == 6  # env over file
    assert s.retrieval.candidates == 30 and s.retrieval.rrf_k == 11  # file over defaults
    assert s.answers.answer_max_tokens == 384  # default where nobody says anything


def test_config_file_argument(tmp_path: Path) -> None:
    config = write(tmp_path / "explicit.toml", 'chat_model = "fake"\nfusion = "bm25"\n')
    s = load_settings(config_file=config)
    assert (s.models.chat_model, s.retrieval.fusion) == ("fake", "bm25")
    assert s.config_file == config


def test_config_file_argument_as_string(tmp_path: Path) -> None:
    config = write(tmp_path / "explicit.toml", "top_k = 9\n")
    assert load_settings(config_file=str(config)).retrieval.top_k == 9


def test_config_file_env_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = write(tmp_path / "from-env.toml", "history_turns = 4\n")
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(config))
    assert load_settings().prompt.history_turns == 4


def test_config_file_argument_beats_env_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(write(tmp_path / "env.toml", "top_k = 2\n")))
    s = load_settings(config_file=write(tmp_path / "arg.toml", "top_k = 3\n"))
    assert s.retrieval.top_k == 3


def test_anaphora_toml_in_cwd_is_read(cwd: Path) -> None:
    write(cwd / "anaphora.toml", 'chat_model = "fake"\ncandidates = 12\n')
    s = load_settings()
    assert (s.models.chat_model, s.retrieval.candidates) == ("fake", 12)


def test_anaphora_toml_in_cwd_ignored_when_file_named(cwd: Path, tmp_path: Path) -> None:
    write(cwd / "anaphora.toml", "candidates = 12\n")
    s = load_settings(config_file=write(tmp_path / "other.toml", "rrf_k = 5\n"))
    assert s.retrieval.candidates == 25 and s.retrieval.rrf_k == 5


def test_env_beats_cwd_toml(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(cwd / "anaphora.toml", 'chat_model = "embedded"\n')
    monkeypatch.setenv("ANAPHORA_CHAT_MODEL", "fake")
    assert load_settings().models.chat_model == "fake"


def test_no_toml_anywhere_is_fine(cwd: Path) -> None:
    assert not (cwd / "anaphora.toml").exists()
    assert load_settings().retrieval.top_k == 5


def test_anaphora_table_form(tmp_path: Path) -> None:
    config = write(
        tmp_path / "table.toml",
        '[anaphora]\nchat_model = "fake"\ntop_k = 4\nopenai_base_url = "http://h:1/v1"\n',
    )
    s = load_settings(config_file=config)
    assert (s.models.chat_model, s.retrieval.top_k, s.models.openai_base_url) == ("fake", 4, "http://h:1/v1")


def test_toml_values_are_validated_and_typed(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", 'data_dir = "~/anaphora-data"\nmodel_timeout_s = 2\n')
    s = load_settings(config_file=config)
    assert s.data_dir == Path("~/anaphora-data").expanduser()
    assert s.models.model_timeout_s == 2.0


# --- TOML errors --------------------------------------------------------------------------------------------


def test_unknown_toml_key_names_it(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "top_k = 3\ntopk = 4\nmystery_option = true\n")
    with pytest.raises(ConfigurationError) as info:
        load_settings(config_file=config)
    assert "topk" in info.value.message and "mystery_option" in info.value.message
    assert str(config) in info.value.message
    assert info.value.hint


def test_unknown_key_in_anaphora_table_names_it(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[anaphora]\nnot_a_setting = 1\n")
    with pytest.raises(ConfigurationError, match="not_a_setting"):
        load_settings(config_file=config)


def test_unknown_key_in_cwd_toml(cwd: Path) -> None:
    write(cwd / "anaphora.toml", "chat_modle = 'fake'\n")
    with pytest.raises(ConfigurationError, match="chat_modle"):
        load_settings()


@pytest.mark.parametrize("text", ["top_k = ", "top_k = 3\ntop_k = 4\n", "[anaphora\n", 'chat_model = "unterminated\n'])
def test_malformed_toml_is_configuration_error(tmp_path: Path, text: str) -> None:
    config = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigurationError) as info:
        load_settings(config_file=config)
    assert str(config) in info.value.message
    assert info.value.hint and "TOML" in info.value.hint


def test_malformed_cwd_toml_is_configuration_error(cwd: Path) -> None:
    write(cwd / "anaphora.toml", "= nope")
    with pytest.raises(ConfigurationError, match=r"anaphora\.toml"):
        load_settings()


def test_missing_named_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigurationError) as info:
        load_settings(config_file=missing)
    assert str(missing) in info.value.message
    assert "does not exist" in info.value.message


def test_missing_config_file_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigurationError, match=r"gone\.toml"):
        load_settings()


# --- validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"top_k": 26}, "top_k"),
        ({"top_k": 10, "candidates": 9}, "top_k"),
        ({"chunk_overlap": 200}, "chunk_overlap"),
        ({"chunk_tokens": 64, "chunk_overlap": 64}, "chunk_overlap"),
        ({"candidates": -1}, "candidates"),
        ({"top_k": 0}, "top_k"),
        ({"history_turns": 3}, "history_turns"),
        ({"history_turns": 65}, "history_turns"),
        ({"chunk_overlap": -5}, "chunk_overlap"),
        ({"model_timeout_s": 0}, "model_timeout_s"),
        ({"answer_temperature": -0.1}, "answer_temperature"),
        ({"context_window": 100}, "context_window"),
        ({"fusion": "max"}, "fusion"),
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_invalid_values_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_settings(**overrides)
    assert field in info.value.message
    assert info.value.message.startswith("invalid settings")
    assert info.value.hint


def test_limits_are_inclusive() -> None:
    s = load_settings(top_k=25, candidates=25, chunk_tokens=64, chunk_overlap=63, history_turns=4)
    assert (s.retrieval.top_k, s.ingest.chunk_overlap, s.prompt.history_turns) == (25, 63, 4)
    assert load_settings(history_turns=64).prompt.history_turns == 64


def test_invalid_env_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_TOP_K", "many")
    with pytest.raises(ConfigurationError, match="top_k"):
        load_settings()


def test_invalid_toml_value_names_the_field(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "candidates = 0\n")
    with pytest.raises(ConfigurationError, match="candidates"):
        load_settings(config_file=config)


def test_cross_field_check_sees_values_from_all_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(write(tmp_path / "c.toml", "candidates = 4\n")))
    monkeypatch.setenv("ANAPHORA_TOP_K", "5")
    with pytest.raises(ConfigurationError, match="top_k"):
        load_settings()


def test_settings_constructor_is_strict_too() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Settings(top_k=100)


# --- settings pick the chat model ---------------------------------------------------------------------------


def test_env_chat_model_fake_selects_fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_CHAT_MODEL", "fake")
    assert isinstance(load_chat_model(load_settings().models), FakeChatModel)


def test_toml_chat_model_fake_selects_fake_model(cwd: Path) -> None:
    write(cwd / "anaphora.toml", '[anaphora]\nchat_model = "fake"\n')
    assert isinstance(load_chat_model(load_settings().models), FakeChatModel)


# --- long-term memory ---------------------------------------------------------------------------------------


def test_memory_is_on_and_kept_forever_by_default() -> None:
    s = load_settings()
    assert (s.memory.memory, s.memory.memory_ttl_days, s.memory.memory_ttl_s, s.stores.memory_store) == (
        "on",
        None,
        None,
        "auto",
    )
    assert s.stores.effective_memory_store == "sqlite"
    assert load_settings(conversation_store="postgres").stores.effective_memory_store == "postgres"
    assert load_settings(conversation_store="redis").stores.effective_memory_store == "sqlite"
    assert load_settings(memory_store="sqlite", conversation_store="postgres").stores.effective_memory_store == "sqlite"


def test_memory_settings_from_env_and_toml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANAPHORA_MEMORY", "off")
    monkeypatch.setenv("ANAPHORA_MEMORY_TTL_DAYS", "30")
    s = load_settings()
    assert s.memory.memory == "off" and s.memory.memory_ttl_days == 30 and s.memory.memory_ttl_s == 30 * 86400
    monkeypatch.setenv("ANAPHORA_MEMORY_TTL_DAYS", "")  # set but empty: unset
    assert load_settings().memory.memory_ttl_days is None
    monkeypatch.delenv("ANAPHORA_MEMORY_TTL_DAYS")
    monkeypatch.delenv("ANAPHORA_MEMORY")
    config = write(tmp_path / "c.toml", 'memory = "on"\nmemory_ttl_days = 0.5\n')
    s = load_settings(config_file=config)
    assert s.memory.memory == "on" and s.memory.memory_ttl_s == 43200


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"memory": "yes"}, "'on' or 'off'"),
        ({"memory": True}, "'on' or 'off'"),
        ({"memory_ttl_days": 0}, "positive number of days"),
        ({"memory_ttl_days": -3}, "positive number of days"),
        ({"memory_ttl_days": "a month"}, "memory_ttl_days"),
        ({"memory_store": "redis"}, "memory_store"),
    ],
)
def test_bad_memory_settings_say_what_is_wrong(overrides: dict, says: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_settings(**overrides)
    assert says in info.value.message and next(iter(overrides)) in info.value.message
    assert info.value.hint


# --- groups -------------------------------------------------------------------------------------------------


def test_settings_has_at_most_40_top_level_fields() -> None:
    assert len(Settings.model_fields) <= 40
    assert set(GROUPS) <= set(Settings.model_fields)


def test_every_name_is_unique_across_groups_and_paths() -> None:
    paths = [name for name in Settings.model_fields if name not in GROUPS]
    names = paths + [name for model in GROUPS.values() for name in model.model_fields]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    # a name equal to a group's is only that group's own field (memory.memory, the switch)
    assert all(GROUP_OF[group] == group for group in GROUPS if group in GROUP_OF)


def test_a_grouped_setting_keeps_its_flat_name_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Settings(top_k=3).retrieval.top_k == 3
    monkeypatch.setenv("ANAPHORA_TOP_K", "4")
    assert load_settings().retrieval.top_k == 4
    monkeypatch.delenv("ANAPHORA_TOP_K")
    assert load_settings(config_file=write(tmp_path / "a.toml", "top_k = 6\n")).retrieval.top_k == 6
    assert load_settings(config_file=write(tmp_path / "b.toml", "[anaphora]\ntop_k = 7\n")).retrieval.top_k == 7


def test_group_forms_work_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Settings(retrieval={"top_k": 3}).retrieval.top_k == 3
    assert Settings(retrieval=RetrievalSettings(top_k=2)).retrieval.top_k == 2
    assert load_settings(config_file=write(tmp_path / "a.toml", "[retrieval]\ntop_k = 8\n")).retrieval.top_k == 8
    nested = write(tmp_path / "b.toml", "[anaphora.retrieval]\ntop_k = 9\n[anaphora.server]\nserver_port = 9000\n")
    s = load_settings(config_file=nested)
    assert (s.retrieval.top_k, s.server.server_port) == (9, 9000)
    monkeypatch.setenv("ANAPHORA_RETRIEVAL__TOP_K", "6")
    monkeypatch.setenv("ANAPHORA_CANDIDATES", "30")
    s = load_settings()
    assert (s.retrieval.top_k, s.retrieval.candidates) == (6, 30)
    monkeypatch.setenv("ANAPHORA_TOP_K", "2")  # the group's own name is the more specific one
    assert load_settings().retrieval.top_k == 6


def test_precedence_holds_for_each_grouped_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[retrieval]\ntop_k = 2\ncandidates = 30\nrrf_k = 11\nfusion = 'rrf'\n")
    monkeypatch.setenv("ANAPHORA_CONFIG_FILE", str(config))
    monkeypatch.setenv("ANAPHORA_TOP_K", "4")
    monkeypatch.setenv("ANAPHORA_RRF_K", "12")
    s = load_settings(retrieval={"top_k": 7})
    assert s.retrieval.top_k == 7  # an argument in the group form over env and file
    assert s.retrieval.rrf_k == 12  # env over file
    assert (s.retrieval.candidates, s.retrieval.fusion) == (30, "rrf")  # the file's other fields in the same group
    assert s.retrieval.bm25_weight == 0.5  # default where nobody says anything
    assert load_settings(top_k=5).retrieval.rrf_k == 12  # a flat argument leaves the rest of its group alone


def test_a_group_instance_argument_keeps_what_it_does_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANAPHORA_CANDIDATES", "40")
    s = Settings(retrieval=RetrievalSettings(top_k=3))
    assert (s.retrieval.top_k, s.retrieval.candidates) == (3, 40)


def test_the_memory_switch_and_the_memory_group_share_a_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Settings(memory="off").memory.enabled is False
    assert Settings(memory={"memory": "off", "memory_recall_k": 2}).memory.memory_recall_k == 2
    monkeypatch.setenv("ANAPHORA_MEMORY", "off")  # the switch, not the group as JSON
    assert load_settings().memory.memory == "off"
    config = write(tmp_path / "c.toml", "[memory]\nmemory_recall_k = 3\n")
    s = load_settings(config_file=config)
    assert (s.memory.memory, s.memory.memory_recall_k) == ("off", 3)


def test_unknown_names_inside_a_group_table_are_named(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[retrieval]\ntopk = 4\n")
    with pytest.raises(ConfigurationError, match=r"retrieval\.topk") as info:
        load_settings(config_file=config)
    assert str(config) in info.value.message
    with pytest.raises(ConfigurationError, match="topk"):
        load_settings(retrieval={"topk": 4})


def test_a_flat_name_in_the_wrong_group_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"server\.top_k"):
        load_settings(config_file=write(tmp_path / "c.toml", "[server]\ntop_k = 4\n"))


def test_cross_field_checks_live_in_their_group() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="top_k cannot exceed candidates"):
        RetrievalSettings(top_k=10, candidates=5)
    with pytest.raises(ConfigurationError, match="retrieval"):
        load_settings(top_k=10, candidates=5)


def test_with_updates_takes_flat_names_and_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    s = Settings(top_k=3, chat_model="fake")
    monkeypatch.setenv("ANAPHORA_CHAT_MODEL", "embedded")  # a copy reads nothing again
    changed = s.with_updates(top_k=4, fusion="bm25", memory="off", server_port=9000)
    assert (changed.retrieval.top_k, changed.retrieval.fusion, changed.memory.memory) == (4, "bm25", "off")
    assert (changed.server.server_port, changed.models.chat_model, changed.retrieval.candidates) == (9000, "fake", 25)
    assert (s.retrieval.top_k, s.server.server_port) == (3, 8000)  # the original is untouched
    with pytest.raises(ValidationError, match="top_k"):
        s.with_updates(top_k=100)
    with pytest.raises(ValidationError, match="no_such_setting"):
        s.with_updates(no_such_setting=1)


def test_the_reference_shows_each_field_under_its_group() -> None:
    text = reference_markdown()
    for group, model in GROUPS.items():
        section = text.split(f"## `{group}`\n", 1)[1].split("\n## ", 1)[0]
        for name in model.model_fields:
            assert f"| `{name}` | `ANAPHORA_{name.upper()}` |" in section
