"""Choosing the conversation store from settings; the PostgreSQL store's construction (no server needed)."""

from __future__ import annotations

import sys

import pytest

from anaphora import Settings
from anaphora.app import build_components
from anaphora.errors import ConfigurationError, MissingDependencyError
from anaphora.store import PostgresConversationStore, SQLiteConversationStore

pytestmark = pytest.mark.unit


def test_sqlite_is_the_default(settings: Settings, fake_model) -> None:
    assert settings.stores.conversation_store == "sqlite"
    components = build_components(settings, model=fake_model)
    try:
        assert isinstance(components.conversations, SQLiteConversationStore)
    finally:
        components.database.close()


def test_postgres_without_a_url_is_refused_with_a_hint(settings: Settings, fake_model) -> None:
    chosen = settings.with_updates(conversation_store="postgres")
    with pytest.raises(ConfigurationError, match="postgres_url") as caught:
        build_components(chosen, model=fake_model)
    assert "ANAPHORA_POSTGRES_URL" in (caught.value.hint or "")


def test_postgres_store_is_built_without_connecting(settings: Settings, fake_model) -> None:
    pytest.importorskip("psycopg_pool")
    chosen = Settings(
        data_dir=settings.data_dir,
        chat_model="fake",
        embedder="hashing",
        conversation_store="postgres",
        postgres_url="postgresql://user:hunter2pw@127.0.0.1:1/anaphora",
    )
    assert "hunter2pw" not in repr(chosen)
    components = build_components(chosen, model=fake_model)
    try:
        store = components.conversations
        assert isinstance(store, PostgresConversationStore)
        assert components.engine.conversations is store
        assert store.pool.closed  # the pool opens on first use, inside the event loop
    finally:
        components.database.close()


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependencyError) as caught:
        PostgresConversationStore("postgresql://localhost/anaphora")
    assert "anaphora[postgres]" in (caught.value.hint or "")
