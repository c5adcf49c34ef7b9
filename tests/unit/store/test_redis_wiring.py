"""Choosing Redis for history and the embedding cache from settings (no server needed: clients connect lazily)."""

from __future__ import annotations

import sys

import pytest
from pydantic import SecretStr

from anaphora import Settings
from anaphora.app import build_components, close_local
from anaphora.errors import ConfigurationError, MissingDependencyError
from anaphora.store import (
    RedisConversationStore,
    RedisEmbeddingCache,
    SQLiteConversationStore,
    SQLiteEmbeddingCache,
)

pytestmark = pytest.mark.unit


def test_redis_defaults(settings: Settings) -> None:
    assert settings.stores.redis_url.get_secret_value() == "redis://127.0.0.1:6379/0"
    assert settings.stores.redis_ttl_s == 7 * 86400
    assert settings.stores.redis_key_prefix == "anaphora:"
    assert settings.stores.embedding_cache_store == "sqlite"


def test_redis_for_history_and_cache_is_built_without_connecting(settings: Settings, fake_model) -> None:
    pytest.importorskip("redis")
    chosen = settings.with_updates(
        conversation_store="redis", embedding_cache_store="redis", redis_ttl_s=3600, redis_key_prefix="tenant-a:"
    )
    components = build_components(chosen, model=fake_model)
    try:
        store = components.conversations
        assert isinstance(store, RedisConversationStore)
        assert (store.ttl_s, store.prefix) == (3600, "tenant-a:")
        assert components.engine.conversations is store
        cache = components.embedder.cache
        assert isinstance(cache, RedisEmbeddingCache)
        assert (cache.ttl_s, cache.prefix) == (3600, "tenant-a:emb:")
    finally:
        close_local(components)


def test_redis_cache_with_sqlite_history(settings: Settings, fake_model) -> None:
    pytest.importorskip("redis")
    components = build_components(settings.with_updates(embedding_cache_store="redis"), model=fake_model)
    try:
        assert isinstance(components.conversations, SQLiteConversationStore)
        assert isinstance(components.embedder.cache, RedisEmbeddingCache)
    finally:
        close_local(components)
    components = build_components(settings, model=fake_model)
    try:
        assert isinstance(components.embedder.cache, SQLiteEmbeddingCache)
    finally:
        close_local(components)


@pytest.mark.parametrize("setting", ["conversation_store", "embedding_cache_store"])
def test_redis_without_a_url_is_refused_with_a_hint(settings: Settings, fake_model, setting: str) -> None:
    chosen = settings.with_updates(**{setting: "redis", "redis_url": SecretStr("")})
    with pytest.raises(ConfigurationError, match="redis_url") as caught:
        build_components(chosen, model=fake_model)
    assert "ANAPHORA_REDIS_URL" in (caught.value.hint or "")


def test_missing_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    for build in (RedisConversationStore, RedisEmbeddingCache):
        with pytest.raises(MissingDependencyError) as caught:
            build("redis://127.0.0.1:6379/0")
        assert "anaphora[redis]" in (caught.value.hint or "")
