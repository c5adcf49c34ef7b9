"""Choosing the passage store from settings; the PostgreSQL passage store's construction (no server needed)."""

from __future__ import annotations

import sys

import pytest

from anaphora import Settings
from anaphora.app import build_components, close_local
from anaphora.errors import ConfigurationError, MissingDependencyError
from anaphora.retrieval import EmbeddedPassageIndex
from anaphora.store import PostgresPassageStore, SQLiteCorpus

pytestmark = pytest.mark.unit


def test_sqlite_with_the_embedded_index_is_the_default(settings: Settings, fake_model) -> None:
    assert settings.stores.passage_store == "sqlite"
    components = build_components(settings, model=fake_model)
    try:
        assert isinstance(components.corpus, SQLiteCorpus)
        assert isinstance(components.passages, EmbeddedPassageIndex)
        assert components.retriever.index is components.passages
    finally:
        close_local(components)


def test_postgres_without_a_url_is_refused_with_a_hint(settings: Settings, fake_model) -> None:
    chosen = settings.with_updates(passage_store="postgres")
    with pytest.raises(ConfigurationError, match="passage_store is 'postgres'") as caught:
        build_components(chosen, model=fake_model)
    assert "ANAPHORA_POSTGRES_URL" in (caught.value.hint or "")


def test_postgres_store_is_built_without_connecting_or_loading_the_embedder(settings: Settings, fake_model) -> None:
    pytest.importorskip("psycopg_pool")
    chosen = Settings(
        data_dir=settings.data_dir,
        chat_model="fake",
        embedder="hashing:64",
        passage_store="postgres",
        postgres_url="postgresql://user:pw@127.0.0.1:1/anaphora",
        postgres_text_search_config="simple",
        postgres_hnsw_ef_search=200,
    )
    components = build_components(chosen, model=fake_model)
    try:
        store = components.passages
        assert isinstance(store, PostgresPassageStore) and components.corpus is store
        assert components.ingestor.corpus is store and components.retriever.index is store
        assert store.pool.closed and callable(store._dim)  # connects and sizes its vectors on first use
        assert (store.dim, store.text_search_config, store.embedder_name) == (64, "simple", "hashing-64")
    finally:
        close_local(components)
    assert store.pool.closed


@pytest.mark.parametrize("config", ["english; DROP TABLE passages", "", "a b", "pg_catalog.english.x"])
def test_text_search_config_must_be_a_name(settings: Settings, config: str) -> None:
    with pytest.raises(ValueError, match="postgres_text_search_config"):
        Settings(data_dir=settings.data_dir, postgres_text_search_config=config)


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependencyError) as caught:
        PostgresPassageStore("postgresql://localhost/anaphora", embedder_name="hashing-384", dim=384)
    assert "anaphora[postgres]" in (caught.value.hint or "") and "passage store" in caught.value.message
