"""Idempotent ingestion through the real wiring (SQLite store + HashingEmbedder behind the cache)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.app import Anaphora, Components, build_components
from anaphora.settings import Settings
from tests.documents import make_pdf

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", chunk_tokens=40, chunk_overlap=8)


@pytest.fixture
def app(settings: Settings) -> Iterator[Components]:
    components = build_components(settings)
    yield components
    components.database.close()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "install.md").write_text(
        "# Install\n\nRun pip install anaphora to get the package.\n\n"
        "## Linux\n\nOn Linux use a virtual environment first.\n",
        encoding="utf-8",
    )
    (folder / "usage.txt").write_text("Ask questions about your documents with anaphora ask.\n", encoding="utf-8")
    (folder / "page.html").write_text("<h1>Web</h1><p>The HTTP service answers on port 8000.</p>", encoding="utf-8")
    return folder


def chunk_rows(app: Components) -> dict[str, tuple[str, str]]:
    """chunk id -> (source, text)."""
    rows = app.database.query(
        "SELECT c.id, d.source, c.text FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.key"
    )
    return {r["id"]: (r["source"], r["text"]) for r in rows}


def sources(app: Components) -> list[str]:
    return [d.source for d in app.corpus.documents()]


def skipped_reasons(report) -> dict[str, str]:
    return {Path(path).name: reason for path, reason in report.skipped}


# -- first ingest and idempotent re-ingest -------------------------------------------------------------------


def test_first_ingest_adds_every_file(app: Components, docs: Path):
    report = app.ingestor.run([docs])
    assert sorted(report.added) == ["install.md", "page.html", "usage.txt"]
    assert report.updated == report.unchanged == report.removed == report.skipped == []
    assert report.warnings == []
    assert sources(app) == ["install.md", "page.html", "usage.txt"]
    rows = chunk_rows(app)
    assert report.chunks_written == len(rows) == app.corpus.chunk_count() >= 3
    assert {"install.md#1", "usage.txt#1", "page.html#1"} <= set(rows)
    assert all(chunk_id.startswith(source + "#") for chunk_id, (source, _) in rows.items())
    assert app.corpus.generation() > 0
    assert app.corpus.embedder() == "hashing-384"
    assert report.seconds >= 0


def test_reingest_without_change_is_a_no_op(app: Components, docs: Path):
    app.ingestor.run([docs])
    generation, before = app.corpus.generation(), chunk_rows(app)
    app.embedder.hits = app.embedder.misses = 0

    report = app.ingestor.run([docs])
    assert sorted(report.unchanged) == ["install.md", "page.html", "usage.txt"]
    assert report.added == report.updated == report.removed == report.skipped == []
    assert report.chunks_written == 0
    assert app.corpus.generation() == generation
    assert chunk_rows(app) == before
    assert app.embedder.hits == app.embedder.misses == 0  # nothing was even sent to the embedder


def test_modified_file_is_updated_and_others_unchanged(app: Components, docs: Path):
    app.ingestor.run([docs])
    generation = app.corpus.generation()
    (docs / "usage.txt").write_text("Completely new wording about zanzibar.\n", encoding="utf-8")

    report = app.ingestor.run([docs])
    assert report.updated == ["usage.txt"]
    assert sorted(report.unchanged) == ["install.md", "page.html"]
    assert report.added == report.removed == []
    assert report.chunks_written == 1
    assert app.corpus.generation() > generation
    assert chunk_rows(app)["usage.txt#1"] == ("usage.txt", "Completely new wording about zanzibar.")


def test_deleted_file_is_removed_with_its_chunks(app: Components, docs: Path):
    app.ingestor.run([docs])
    assert any(source == "install.md" for source, _ in chunk_rows(app).values())
    (docs / "install.md").unlink()

    report = app.ingestor.run([docs])
    assert report.removed == ["install.md"]
    assert sorted(report.unchanged) == ["page.html", "usage.txt"]
    assert sources(app) == ["page.html", "usage.txt"]
    rows = chunk_rows(app)
    assert not any(chunk_id.startswith("install.md") for chunk_id in rows)
    assert app.corpus.chunk_count() == len(rows)
    # No orphan chunk rows are left behind (ON DELETE CASCADE).
    orphans = app.database.query(
        "SELECT COUNT(*) AS n FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)"
    )[0]["n"]
    assert orphans == 0


def test_prune_false_keeps_deleted_files(app: Components, docs: Path):
    app.ingestor.run([docs])
    (docs / "install.md").unlink()
    report = app.ingestor.run([docs], prune=False)
    assert report.removed == []
    assert "install.md" in sources(app)


def test_empty_folder_warns_and_loses_nothing(app: Components, docs: Path, tmp_path: Path):
    app.ingestor.run([docs])
    before, generation = chunk_rows(app), app.corpus.generation()
    empty = tmp_path / "empty"
    empty.mkdir()

    report = app.ingestor.run([empty])
    assert report.warnings == [(str(empty.resolve()), "no supported files found")]
    assert report.added == report.updated == report.removed == []
    assert chunk_rows(app) == before
    assert app.corpus.generation() == generation


def test_nonexistent_path_is_skipped(app: Components, docs: Path, tmp_path: Path):
    app.ingestor.run([docs])
    before = chunk_rows(app)
    missing = tmp_path / "nope"
    report = app.ingestor.run([missing, docs])
    assert (str(missing.resolve()), "does not exist") in report.skipped
    assert report.removed == []
    assert sorted(report.unchanged) == ["install.md", "page.html", "usage.txt"]
    assert chunk_rows(app) == before


def test_single_file_path_is_ingested_and_does_not_prune_siblings(app: Components, docs: Path):
    app.ingestor.run([docs])
    (docs / "usage.txt").unlink()
    report = app.ingestor.run([docs / "install.md"])
    assert report.unchanged == ["install.md"]
    assert report.removed == []  # a file argument is not a folder to prune
    assert "usage.txt" in sources(app)


# -- bad inputs never disturb what is indexed ----------------------------------------------------------------


def test_corrupt_pdf_is_skipped_others_indexed(app: Components, docs: Path):
    (docs / "broken.pdf").write_bytes(os.urandom(2048))
    report = app.ingestor.run([docs])
    assert sorted(report.added) == ["install.md", "page.html", "usage.txt"]
    reasons = skipped_reasons(report)
    assert set(reasons) == {"broken.pdf"}
    assert "not a readable PDF" in reasons["broken.pdf"]
    assert "broken.pdf" not in sources(app)


def test_previously_indexed_pdf_survives_corruption(app: Components, docs: Path):
    (docs / "manual.pdf").write_bytes(make_pdf("Hello World manual text"))
    first = app.ingestor.run([docs])
    assert "manual.pdf" in first.added
    assert chunk_rows(app)["manual.pdf#1"][1] == "Hello World manual text"
    before = chunk_rows(app)

    (docs / "manual.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(512))
    report = app.ingestor.run([docs])
    assert "not a readable PDF" in skipped_reasons(report)["manual.pdf"]
    assert report.removed == []
    assert sorted(report.unchanged) == ["install.md", "page.html", "usage.txt"]
    assert chunk_rows(app) == before  # the old, good version is still served


def test_unreadable_file_is_skipped_with_a_reason(app: Components, docs: Path, monkeypatch: pytest.MonkeyPatch):
    app.ingestor.run([docs])
    before = chunk_rows(app)
    target = (docs / "usage.txt").resolve()
    real_read_bytes = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = app.ingestor.run([docs])
    assert skipped_reasons(report) == {"usage.txt": "cannot read: Permission denied"}
    assert report.removed == []  # an unreadable file is not a deleted one
    assert chunk_rows(app) == before


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_chmod_000_file_is_skipped(app: Components, docs: Path):
    locked = docs / "locked.md"
    locked.write_text("# Secret\n\ntext\n", encoding="utf-8")
    locked.chmod(0)
    try:
        report = app.ingestor.run([docs])
    finally:
        locked.chmod(0o644)
    assert "cannot read" in skipped_reasons(report)["locked.md"]
    assert sorted(report.added) == ["install.md", "page.html", "usage.txt"]


def test_non_utf8_txt_indexed_with_warning(app: Components, docs: Path):
    (docs / "legacy.txt").write_bytes("Caf\u00e9 menu: cr\u00e8me br\u00fbl\u00e9e.".encode("cp1252"))
    report = app.ingestor.run([docs])
    assert "legacy.txt" in report.added
    assert [(Path(p).name, w) for p, w in report.warnings] == [
        ("legacy.txt", "not valid UTF-8; decoded as Windows-1252")
    ]
    assert chunk_rows(app)["legacy.txt#1"][1] == "Caf\u00e9 menu: cr\u00e8me br\u00fbl\u00e9e."


def test_empty_and_heading_only_files_are_skipped_with_precise_reasons(app: Components, docs: Path):
    (docs / "blank.md").write_text("\n\n", encoding="utf-8")
    (docs / "title-only.md").write_text("# Release notes\n\n## 2.0\n", encoding="utf-8")
    report = app.ingestor.run([docs])
    reasons = skipped_reasons(report)
    assert reasons["blank.md"] == "empty file"
    assert reasons["title-only.md"].startswith("no body text")
    assert "blank.md" not in sources(app) and "title-only.md" not in sources(app)


def test_unsupported_and_hidden_files(app: Components, docs: Path):
    (docs / "picture.png").write_bytes(b"\x89PNG")
    (docs / ".secret.md").write_text("# Hidden\n\nhidden file\n", encoding="utf-8")
    hidden_dir = docs / ".git"
    hidden_dir.mkdir()
    (hidden_dir / "notes.md").write_text("# In a hidden folder\n\ntext\n", encoding="utf-8")
    nested = docs / "sub" / ".cache"
    nested.mkdir(parents=True)
    (nested / "x.txt").write_text("cached\n", encoding="utf-8")
    (docs / "sub" / "visible.md").write_text("# Sub\n\nvisible nested file\n", encoding="utf-8")

    report = app.ingestor.run([docs])
    assert sorted(report.added) == ["install.md", "page.html", "sub/visible.md", "usage.txt"]
    assert skipped_reasons(report) == {"picture.png": "unsupported file type .png"}
    mentioned = " ".join(p for p, _ in report.skipped + report.warnings)
    assert ".secret" not in mentioned and ".git" not in mentioned and ".cache" not in mentioned
    assert "sub/visible.md#1" in chunk_rows(app)


# -- JSONL passage corpora -----------------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_jsonl_corpus_keeps_given_ids(app: Components, tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(
        folder / "passages.jsonl",
        [
            {"id": "q-101", "title": "Apples", "text": "Apples are red or green."},
            {"id": "q-102", "text": "Bananas are yellow."},
        ],
    )
    report = app.ingestor.run([folder])
    assert report.added == ["passages.jsonl"]
    assert report.chunks_written == 2
    rows = app.database.query("SELECT id, heading, text, ordinal FROM chunks ORDER BY ordinal")
    assert [(r["id"], r["heading"], r["text"], r["ordinal"]) for r in rows] == [
        ("q-101", "Apples", "Apples are red or green.", 1),
        ("q-102", "", "Bananas are yellow.", 2),
    ]


def test_jsonl_with_bad_line_is_skipped_naming_the_line(app: Components, tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "bad.jsonl").write_text('{"id": "a", "text": "ok"}\n{"id": "b"}\n', encoding="utf-8")
    report = app.ingestor.run([folder])
    assert "line 2" in skipped_reasons(report)["bad.jsonl"]
    assert app.corpus.chunk_count() == 0


def test_clashing_jsonl_ids_in_a_later_run_skip_the_second_file(app: Components, tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"id": "p1", "text": "alpha"}, {"id": "p2", "text": "bravo"}])
    app.ingestor.run([folder])
    write_jsonl(folder / "b.jsonl", [{"id": "p9", "text": "charlie"}, {"id": "p2", "text": "delta"}])

    report = app.ingestor.run([folder])
    reason = skipped_reasons(report)["b.jsonl"]
    assert "'p2'" in reason and "already used" in reason
    assert report.unchanged == ["a.jsonl"]
    assert chunk_rows(app) == {"p1": ("a.jsonl", "alpha"), "p2": ("a.jsonl", "bravo")}


def test_duplicate_ids_inside_one_jsonl_file_are_rejected(app: Components, tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "dup.jsonl", [{"id": "x", "text": "one"}, {"id": "x", "text": "two"}])
    report = app.ingestor.run([folder])
    assert "'x'" in skipped_reasons(report)["dup.jsonl"]
    assert app.corpus.chunk_count() == 0


def test_clashing_jsonl_ids_in_the_same_run_skip_the_second_file(app: Components, tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"id": "p1", "text": "alpha"}])
    write_jsonl(folder / "b.jsonl", [{"id": "p1", "text": "echo"}])
    (folder / "c.md").write_text("# C\n\nlater file\n", encoding="utf-8")
    report = app.ingestor.run([folder])
    assert sorted(report.added) == ["a.jsonl", "c.md"]
    reason = skipped_reasons(report)["b.jsonl"]
    assert "'p1'" in reason and "already used" in reason
    assert chunk_rows(app) == {"p1": ("a.jsonl", "alpha"), "c.md#1": ("c.md", "later file")}


def test_same_file_name_in_two_folders_is_indexed_twice(app: Components, tmp_path: Path):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nreadme of folder {name}\n", encoding="utf-8")
    app.ingestor.run([tmp_path / "one"])
    report = app.ingestor.run([tmp_path / "two"])
    assert report.added == ["README.md"], report.skipped
    keys, _ = app.corpus.keys_and_texts()
    assert {c.id for c in app.corpus.chunks(list(keys)).values()} == {"README.md#1", "two/README.md#1"}


# -- force and the embedding cache ---------------------------------------------------------------------------


def test_force_reembeds_unchanged_files(app: Components, docs: Path):
    first = app.ingestor.run([docs])
    generation = app.corpus.generation()
    app.embedder.hits = app.embedder.misses = 0

    report = app.ingestor.run([docs], force=True)
    assert sorted(report.updated) == ["install.md", "page.html", "usage.txt"]
    assert report.unchanged == report.added == []
    assert report.chunks_written == first.chunks_written
    # every chunk went through the (cached) embedder again
    assert app.embedder.hits == first.chunks_written
    assert app.embedder.misses == 0
    assert app.corpus.generation() > generation


def test_cache_counts_only_the_changed_chunks(app: Components, docs: Path, monkeypatch: pytest.MonkeyPatch):
    # an Install section too long to merge with its Linux subsection (tiny sections merge up to the chunk size)
    install = "Run pip install anaphora to get the package. " * 3
    (docs / "install.md").write_text(
        f"# Install\n\n{install}\n\n## Linux\n\nOn Linux use a virtual environment first.\n", encoding="utf-8"
    )
    first = app.ingestor.run([docs])
    assert app.embedder.misses == first.chunks_written
    assert app.embedder.hits == 0
    before = chunk_rows(app)
    install_chunks = [cid for cid, (source, _) in before.items() if source == "install.md"]
    assert len(install_chunks) == 2  # one per section

    # Change the Linux section only: the Install section's chunk text (and so its cache key) stays the same.
    (docs / "install.md").write_text(
        f"# Install\n\n{install}\n\n## Linux\n\nOn Linux prefer pipx for command line tools.\n", encoding="utf-8"
    )
    app.embedder.hits = app.embedder.misses = 0
    embedded: list[str] = []
    real_embed = app.embedder.inner.embed

    def recording_embed(texts):
        embedded.extend(texts)
        return real_embed(texts)

    monkeypatch.setattr(app.embedder.inner, "embed", recording_embed)
    report = app.ingestor.run([docs])
    assert report.updated == ["install.md"]
    assert report.chunks_written == 2
    assert app.embedder.misses == 1
    assert app.embedder.hits == 1
    assert embedded == ["Install > Linux\nOn Linux prefer pipx for command line tools."]


def test_progress_callback_reaches_the_total(app: Components, docs: Path):
    calls: list[tuple[int, int]] = []
    report = app.ingestor.run([docs], progress=lambda done, total: calls.append((done, total)))
    assert calls
    assert calls[-1] == (report.chunks_written, report.chunks_written)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_changing_chunk_settings_rechunks(settings: Settings, docs: Path):
    first = build_components(settings)
    try:
        first.ingestor.run([docs])
    finally:
        first.database.close()
    second = build_components(settings.with_updates(chunk_tokens=64))
    try:
        report = second.ingestor.run([docs])
    finally:
        second.database.close()
    assert sorted(report.updated) == ["install.md", "page.html", "usage.txt"]
    assert report.unchanged == []


def test_an_upgrade_that_parses_files_differently_rechunks_them(app: Components, docs: Path, monkeypatch):
    """An index built before a parsing fix would otherwise keep the old chunks of every file that did not change."""
    from anaphora.ingest import ingestor

    first = app.ingestor.run([docs])
    assert app.ingestor.run([docs]).updated == []
    monkeypatch.setattr(ingestor, "PARSING", ingestor.PARSING + 1)
    report = app.ingestor.run([docs])
    assert sorted(report.updated) == ["install.md", "page.html", "usage.txt"]
    assert report.chunks_written == first.chunks_written


def test_facade_ingest_round_trip(settings: Settings, docs: Path):
    with Anaphora(settings) as rag:
        assert sorted(rag.ingest([docs]).added) == ["install.md", "page.html", "usage.txt"]
        assert sorted(rag.ingest([docs]).unchanged) == ["install.md", "page.html", "usage.txt"]
