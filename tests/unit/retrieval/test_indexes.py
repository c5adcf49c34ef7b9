"""IndexCache: built from SQLite, stamped with the corpus generation, reloaded, rebuilt when stale."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anaphora.app import Components, build_components
from anaphora.errors import ConfigurationError
from anaphora.retrieval import IndexCache
from anaphora.retrieval.bm25 import BM25Index
from anaphora.settings import Settings

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake")


@pytest.fixture
def app(settings: Settings) -> Iterator[Components]:
    components = build_components(settings)
    yield components
    components.database.close()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nThe aardvark digs burrows at night.\n", encoding="utf-8")
    (folder / "beta.md").write_text("# Beta\n\nThe barracuda hunts in warm reefs.\n", encoding="utf-8")
    return folder


@pytest.fixture
def build_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts BM25Index.build calls, i.e. real (re)builds of the search indexes."""
    calls: list[int] = []
    original = BM25Index.build.__func__

    def counting(cls, keys, texts):
        calls.append(len(texts))
        return original(cls, keys, texts)

    monkeypatch.setattr(BM25Index, "build", classmethod(counting))
    return calls


def fresh_cache(app: Components, name: str | None = None) -> IndexCache:
    directory = app.settings.data_dir / "index"
    return IndexCache(app.corpus, directory, name or app.embedder.name, app.embedder.dim)


def top_bm25_source(app: Components, cache: IndexCache, query: str) -> str | None:
    results = cache.get().bm25.search(query, 5)
    if not results:
        return None
    return app.corpus.chunks([results[0][0]])[results[0][0]].source


def test_first_get_builds_and_saves(app: Components, docs: Path, build_calls: list[int]):
    app.ingestor.run([docs])
    indexes = app.passages.indexes.get()
    assert build_calls == [2]
    assert indexes.generation == app.corpus.generation()
    assert len(indexes.dense) == 2
    directory = app.settings.data_dir / "index"
    stamp = json.loads((directory / "stamp.json").read_text())
    assert stamp["generation"] == app.corpus.generation()
    assert stamp["embedder"] == "hashing-384"
    assert (directory / "bm25" / "keys.npy").exists()
    assert (directory / "dense" / "keys.npy").exists()
    assert not directory.with_name("index.tmp").exists()


def test_unchanged_generation_reuses_the_in_memory_index(app: Components, docs: Path, build_calls: list[int]):
    app.ingestor.run([docs])
    first = app.passages.indexes.get()
    assert app.passages.indexes.get() is first
    app.ingestor.run([docs])  # no change: generation stays
    assert app.passages.indexes.get() is first
    assert build_calls == [2]


def test_rebuilds_after_the_generation_changes(app: Components, docs: Path, build_calls: list[int]):
    app.ingestor.run([docs])
    before = app.passages.indexes.get()
    assert top_bm25_source(app, app.passages.indexes, "zeppelin") is None

    (docs / "gamma.md").write_text("# Gamma\n\nA zeppelin floats over the city.\n", encoding="utf-8")
    app.ingestor.run([docs])
    after = app.passages.indexes.get()
    assert after.generation > before.generation
    assert build_calls == [2, 3]
    assert top_bm25_source(app, app.passages.indexes, "zeppelin") == "gamma.md"
    assert len(after.dense) == 3


def test_fresh_cache_loads_from_disk_without_rebuilding(app: Components, docs: Path, build_calls: list[int]):
    app.ingestor.run([docs])
    built = app.passages.indexes.get()
    assert build_calls == [2]

    cache = fresh_cache(app)
    loaded = cache.get()
    assert build_calls == [2]  # read from disk, not rebuilt
    assert loaded.generation == built.generation
    for query in ("aardvark burrows", "barracuda reefs"):
        assert loaded.bm25.search(query, 5) == built.bm25.search(query, 5)
    vector = app.embedder.embed(["aardvark burrows"])[0]
    assert loaded.dense.search(vector, 2) == built.dense.search(vector, 2)
    assert top_bm25_source(app, cache, "aardvark") == "alpha.md"


@pytest.mark.parametrize(
    "damage",
    [
        "corrupt-stamp",
        "empty-stamp",
        "old-generation",
        "other-embedder-stamp",
        "missing-bm25",
        "missing-stamp",
    ],
)
def test_damaged_or_stale_cache_on_disk_is_rebuilt(app: Components, docs: Path, build_calls: list[int], damage: str):
    import shutil

    app.ingestor.run([docs])
    app.passages.indexes.get()
    directory = app.settings.data_dir / "index"
    stamp = directory / "stamp.json"
    generation = app.corpus.generation()
    if damage == "corrupt-stamp":
        stamp.write_text("{not json")
    elif damage == "empty-stamp":
        stamp.write_text("")
    elif damage == "old-generation":
        stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "generation": generation - 1}))
    elif damage == "other-embedder-stamp":
        stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "embedder": "someone-else"}))
    elif damage == "missing-bm25":
        shutil.rmtree(directory / "bm25")
    else:
        stamp.unlink()

    cache = fresh_cache(app)
    rebuilt = cache.get()
    assert build_calls == [2, 2]
    assert rebuilt.generation == generation
    assert top_bm25_source(app, cache, "barracuda") == "beta.md"
    # and the rebuild repaired the cache on disk
    repaired = json.loads(stamp.read_text())
    assert (repaired["generation"], repaired["embedder"]) == (generation, "hashing-384")
    fresh_cache(app).get()
    assert build_calls == [2, 2]


def test_other_embedder_name_raises_configuration_error(app: Components, docs: Path):
    app.ingestor.run([docs])
    cache = fresh_cache(app, name="sentence-transformers-other")
    with pytest.raises(ConfigurationError) as caught:
        cache.get()
    assert "hashing-384" in caught.value.message
    assert "sentence-transformers-other" in caught.value.message
    assert "anaphora ingest PATH re-embeds" in (caught.value.hint or "")


def test_other_embedder_name_is_fine_for_an_empty_corpus(app: Components):
    cache = fresh_cache(app, name="another-embedder")
    assert cache.get().generation == 0


def test_empty_corpus_gives_empty_indexes(app: Components):
    indexes = app.passages.indexes.get()
    assert indexes.generation == 0
    assert indexes.bm25.search("anything at all", 5) == []
    assert indexes.dense.search(np.ones(app.embedder.dim, dtype=np.float32) / 20, 5) == []
    # and the empty cache round-trips through the disk
    assert fresh_cache(app).get().bm25.search("anything", 5) == []


def test_corpus_emptied_by_removal_gives_empty_indexes(app: Components, docs: Path):
    app.ingestor.run([docs])
    assert app.passages.indexes.get().bm25.search("aardvark", 5)
    for file in docs.iterdir():
        file.unlink()
    report = app.ingestor.run([docs])
    assert sorted(report.removed) == ["alpha.md", "beta.md"]
    indexes = app.passages.indexes.get()
    assert indexes.bm25.search("aardvark", 5) == []
    assert len(indexes.dense) == 0


def test_index_of_a_replaced_database_is_not_reused(settings: Settings, tmp_path: Path):
    old_docs, new_docs = tmp_path / "old", tmp_path / "new"
    old_docs.mkdir()
    new_docs.mkdir()
    (old_docs / "old.md").write_text("# Old\n\nAn aardvark digs.\n", encoding="utf-8")
    (new_docs / "new.md").write_text("# New\n\nA zeppelin floats.\n", encoding="utf-8")

    first = build_components(settings)
    first.ingestor.run([old_docs])
    first.passages.indexes.get()  # saved, stamped generation 1
    first.database.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{settings.data_dir / 'anaphora.db'}{suffix}").unlink(missing_ok=True)

    second = build_components(settings)
    try:
        second.ingestor.run([new_docs])
        assert second.corpus.generation() == 1
        assert top_bm25_source(second, second.passages.indexes, "zeppelin") == "new.md"
    finally:
        second.database.close()


def test_a_change_by_another_process_shows_within_recheck_s(app: Components, docs: Path, tmp_path: Path):
    """The generation is read at most every recheck_s seconds; this process's own writes show at once."""
    from anaphora.store.sqlite_corpus import SQLiteCorpus
    from anaphora.store.sqlite_database import Database

    app.ingestor.run([docs])
    cache = IndexCache(app.corpus, tmp_path / "idx", app.embedder.name, app.embedder.dim, recheck_s=3600)
    seen = cache.get().generation
    other = Database(app.settings.data_dir / "anaphora.db")  # another connection, as another process would have
    try:
        SQLiteCorpus(other).remove_documents([(str(docs.resolve()), "alpha.md")])
    finally:
        other.close()
    assert app.corpus.generation() > seen
    assert cache.get().generation == seen, "within recheck_s the cached indexes are served as they are"
    cache.recheck_s = 0
    assert cache.get().generation == seen, "the change starts a rebuild; the turn is served what is built"
    assert cache.wait_for_rebuild(30)
    assert cache.get().generation == app.corpus.generation()
    cache.recheck_s = 3600
    app.corpus.remove_documents([(str(docs.resolve()), "beta.md")])  # a write through this process's corpus
    cache.get()
    assert cache.wait_for_rebuild(30)
    assert cache.get().generation == app.corpus.generation()


def test_passage_cache_never_serves_text_of_an_older_generation(app: Components, docs: Path):
    app.ingestor.run([docs])
    index = app.passages
    [ranking] = index.lexical(["aardvark"], 1)
    key = ranking[0][0]
    assert "aardvark" in index.passages([key])[key].text
    (docs / "alpha.md").write_text("# Alpha\n\nThe aardvark now sleeps all day.\n", encoding="utf-8")
    app.ingestor.run([docs])
    [ranking] = index.lexical(["aardvark"], 1)
    fresh = index.passages([ranking[0][0]])
    assert "sleeps" in fresh[ranking[0][0]].text
    assert index.passages([key]).get(key) is None or "sleeps" in index.passages([key])[key].text


def test_a_stale_generation_is_served_while_the_next_one_builds(app: Components, docs: Path, monkeypatch):
    """get() never builds once a generation exists: it starts the rebuild in a thread and returns at once."""
    app.ingestor.run([docs])
    cache = app.passages.indexes
    before = cache.get()
    entered, release = threading.Event(), threading.Event()
    original = BM25Index.build.__func__

    def slow(cls, keys, texts):
        entered.set()
        release.wait(30)
        return original(cls, keys, texts)

    monkeypatch.setattr(BM25Index, "build", classmethod(slow))
    app.corpus.remove_documents([(str(docs.resolve()), "alpha.md")])
    try:
        started = time.perf_counter()
        assert cache.get() is before
        assert entered.wait(10) and time.perf_counter() - started < 5
        assert cache.get() is before, "served again while the rebuild is held"
        assert app.passages.passages([key for key, _ in before.bm25.search("aardvark", 5)]) == {}, (
            "a passage deleted since is left out though the older generation still finds it"
        )
    finally:
        release.set()
    assert cache.wait_for_rebuild(30)
    assert cache.get().generation == app.corpus.generation() > before.generation


def test_a_background_rebuild_failure_keeps_the_previous_generation_serving(app: Components, docs: Path, monkeypatch):
    app.ingestor.run([docs])
    cache = app.passages.indexes
    before = cache.get()

    def broken(cls, keys, texts):
        raise MemoryError("no room for the index")

    monkeypatch.setattr(BM25Index, "build", classmethod(broken))
    app.corpus.remove_documents([(str(docs.resolve()), "alpha.md")])
    cache.get()
    assert cache.wait_for_rebuild(30)
    assert cache.get() is before


def test_passage_keys_are_never_reused_after_a_removal(app: Components, docs: Path):
    """An index of an older generation must not find another passage under a removed passage's key."""
    app.ingestor.run([docs])
    keys_before = {int(k) for k in app.corpus.keys_and_texts()[0]}
    for file in docs.iterdir():
        file.unlink()
    app.ingestor.run([docs])  # both removed
    (docs / "gamma.md").write_text("# Gamma\n\nA zeppelin floats over the city.\n", encoding="utf-8")
    app.ingestor.run([docs])
    keys_after = {int(k) for k in app.corpus.keys_and_texts()[0]}
    assert keys_after and not keys_after & keys_before


def test_a_large_corpus_is_built_by_a_child_process_and_loaded(app: Components, docs: Path, build_calls: list[int]):
    """Past child_from passages the build runs in another process (low priority, its own GIL): this process builds
    nothing and loads what the child saved, stamped with the generation."""
    app.ingestor.run([docs])
    build_calls.clear()
    cache = IndexCache(
        app.corpus, app.settings.data_dir / "child-index", app.embedder.name, app.embedder.dim, child_from=1
    )
    indexes = cache.get()
    assert build_calls == [], "built by the child, not here"
    assert indexes.generation == app.corpus.generation() and len(indexes.dense) == 2
    assert top_bm25_source(app, cache, "barracuda") == "beta.md"
    stamp = json.loads((app.settings.data_dir / "child-index" / "stamp.json").read_text())
    assert stamp["generation"] == app.corpus.generation()


def test_a_child_that_cannot_build_leaves_the_build_to_this_process(
    app: Components, docs: Path, build_calls, monkeypatch
):
    app.ingestor.run([docs])
    build_calls.clear()
    monkeypatch.setattr("anaphora.retrieval.rebuild.sys.executable", "/nonexistent/python")
    cache = IndexCache(
        app.corpus, app.settings.data_dir / "child-index", app.embedder.name, app.embedder.dim, child_from=1
    )
    assert len(cache.get().dense) == 2
    assert build_calls == [2]
