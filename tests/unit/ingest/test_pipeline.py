"""The ingest pipeline's throughput parts: parsing read ahead in a thread, windows of many documents embedded in one
call and written in one transaction, and passage ids chosen again when another process took them meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from anaphora.app import Components, build_components
from anaphora.errors import PassageIdTakenError
from anaphora.ingest.read_ahead import read_ahead
from anaphora.settings import Settings
from anaphora.store import Database, SQLiteCorpus
from anaphora.store.protocols import DocumentVersion
from anaphora.types import Chunk

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


# -- read_ahead ----------------------------------------------------------------------------------------------


def test_read_ahead_keeps_order_and_runs_in_another_thread() -> None:
    threads = set()

    def produce() -> Iterator[int]:
        for n in range(50):
            threads.add(threading.current_thread().name)
            yield n

    assert list(read_ahead(produce(), 4)) == list(range(50))
    assert threads == {"anaphora-read-ahead"}


def test_read_ahead_is_bounded() -> None:
    made = []

    def produce() -> Iterator[int]:
        for n in range(100):
            made.append(n)
            yield n

    items = read_ahead(produce(), 3)
    assert next(items) == 0
    time.sleep(0.3)  # the producer fills the queue and waits
    assert len(made) <= 1 + 3 + 1  # the one taken, the queue, the one waiting to be put
    items.close()


def test_read_ahead_raises_the_producers_error_where_it_happened() -> None:
    def produce() -> Iterator[int]:
        yield 1
        raise ValueError("bad file")

    items = read_ahead(produce(), 2)
    assert next(items) == 1
    with pytest.raises(ValueError, match="bad file"):
        next(items)


def test_a_consumer_that_stops_early_stops_the_producer() -> None:
    finished = threading.Event()

    def produce() -> Iterator[int]:
        try:
            yield from range(10_000)
        finally:
            finished.set()

    for n in read_ahead(produce(), 2):
        if n == 5:
            break
    assert finished.wait(2)


# -- windows -------------------------------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", chunk_tokens=40, chunk_overlap=8)


@pytest.fixture
def app(settings: Settings) -> Iterator[Components]:
    components = build_components(settings)
    yield components
    components.database.close()


def many_files(folder: Path, count: int) -> Path:
    folder.mkdir()
    for n in range(count):
        (folder / f"page{n:02}.md").write_text(f"# Page {n}\n\nPage number {n} explains widget {n} in detail.\n")
    return folder


def test_many_documents_are_embedded_in_one_call_and_written_in_one_transaction(
    app: Components, tmp_path: Path, monkeypatch
) -> None:
    docs = many_files(tmp_path / "docs", 30)
    calls, writes = [], []
    embed, replace = app.embedder.inner.embed, app.corpus.replace_documents
    monkeypatch.setattr(app.embedder.inner, "embed", lambda texts: calls.append(len(texts)) or embed(texts))
    monkeypatch.setattr(app.corpus, "replace_documents", lambda docs, e: writes.append(len(docs)) or replace(docs, e))
    report = app.ingestor.run([docs])
    assert len(report.added) == 30 and report.chunks_written == 30
    assert calls == [30] and writes == [30]
    assert app.corpus.chunk_count() == 30


def test_windows_hold_whole_documents_and_progress_grows_to_the_total(app: Components, tmp_path: Path) -> None:
    docs = many_files(tmp_path / "docs", 40)
    small = app.ingestor.settings.model_copy(update={"embed_batch_size": 1})  # windows of 16 chunks at most
    app.ingestor.settings = small
    calls: list[tuple[int, int]] = []
    report = app.ingestor.run([docs], progress=lambda done, total: calls.append((done, total)))
    # the first windows grow from one batch (the embedder starts on the first batch parsed), then 16 at a time
    assert [done for done, _ in calls] == [1, 3, 7, 15, 31, 40]
    assert all(done <= total for done, total in calls) and calls[-1] == (40, 40)
    assert report.chunks_written == app.corpus.chunk_count() == 40


def test_an_embedder_failure_writes_nothing_of_its_window(app: Components, tmp_path: Path, monkeypatch) -> None:
    docs = many_files(tmp_path / "docs", 5)

    def broken(texts):
        raise RuntimeError("embedder crashed")

    monkeypatch.setattr(app.embedder.inner, "embed", broken)
    with pytest.raises(RuntimeError, match="embedder crashed"):
        app.ingestor.run([docs])
    assert app.corpus.chunk_count() == 0 and app.corpus.documents() == []


# -- ids taken by another process meanwhile ------------------------------------------------------------------


def test_ids_taken_meanwhile_are_chosen_again_and_nothing_is_lost(
    app: Components, settings: Settings, tmp_path: Path, monkeypatch
) -> None:
    """Another ingestion (another process, its own connection) writes a same-named file of another folder between
    this run's choice of ids and its write: the write is refused, the ids chosen again (prefixed with the folder)."""
    ours = many_files(tmp_path / "ours", 3)
    other = tmp_path / "other"
    other.mkdir()
    (other / "page01.md").write_text("# Elsewhere\n\nA different page with the same name in another folder.\n")
    replace = app.corpus.replace_documents
    raced = []

    def racing(documents, embedder):
        if not raced:
            raced.append(True)
            rival = build_components(settings)  # its own connection to the same database, like another process
            try:
                rival.ingestor.run([other])
            finally:
                rival.database.close()
        return replace(documents, embedder)

    monkeypatch.setattr(app.corpus, "replace_documents", racing)
    report = app.ingestor.run([ours], prune=False)
    assert sorted(report.added) == ["page00.md", "page01.md", "page02.md"]
    ids = [r["id"] for r in app.database.query("SELECT id FROM chunks ORDER BY id")]
    assert len(ids) == len(set(ids)) == 4
    assert "page01.md#1" in ids and "ours/page01.md#1" in ids  # the rival's kept its id, ours moved
    assert report.chunks_written == 3


def test_the_store_refuses_a_write_whose_ids_another_document_uses(tmp_path: Path) -> None:
    corpus = SQLiteCorpus(Database(tmp_path / "a.db"))
    vector = np.ones((1, 4), dtype=np.float32)
    corpus.replace_document("/a", "x.md", "h", [Chunk(id="x#1", text="t", source="x.md", ordinal=1)], vector, "e")
    clash = DocumentVersion("/b", "y.md", "h", [Chunk(id="x#1", text="u", source="y.md", ordinal=1)], vector)
    fine = DocumentVersion("/b", "z.md", "h", [Chunk(id="z#1", text="v", source="z.md", ordinal=1)], vector)
    with pytest.raises(PassageIdTakenError):
        corpus.replace_documents([fine, clash], "e")
    assert [d.source for d in corpus.documents()] == ["x.md"]  # all or nothing
