"""Hostile files from the ingestion probe (issue 16): each one is reported as skipped with its reason, and the run
goes on with the files after it. Before, an undecodable file name or a 100k-deep JSONL line aborted `anaphora
ingest` with a traceback, and links, pipes and devices vanished without a word."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf.filters import ZLIB_MAX_OUTPUT_LENGTH

from anaphora.app import Anaphora
from anaphora.settings import Settings
from tests.documents import flate_bomb, make_pdf

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]
GOOD = "# Kestrel\n\nKestrel installs with the Helm chart on Kubernetes.\n"
DEEP_JSONL = '{"id": "p", "text": ' + "[" * 100_000 + "]" * 100_000 + "}\n"


def rag(tmp_path: Path, **overrides) -> Anaphora:
    return Anaphora(Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", **overrides))


def skipped(report) -> dict[str, str]:
    return {os.path.basename(path): reason for path, reason in report.skipped}


def test_cli_ingest_reports_hostile_files_and_ingests_the_rest(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(os.path.join(os.fsencode(docs), b"caf\xe9-\xff.md"), "wb") as odd:
        odd.write(GOOD.encode())
    (docs / "deep.jsonl").write_text(DEEP_JSONL, encoding="utf-8")
    (docs / "bomb.pdf").write_bytes(make_pdf("x", flate_content=flate_bomb(ZLIB_MAX_OUTPUT_LENGTH + (1 << 20))))
    (docs / "title-only.md").write_text("# Release notes\n\n## 2.0\n", encoding="utf-8")
    (docs / "zz-after.md").write_text(GOOD, encoding="utf-8")  # sorts after every hostile file
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "300",
        "PYTHONIOENCODING": "utf-8",
    }
    result = subprocess.run(
        [sys.executable, "-m", "anaphora", "ingest", "--verbose", str(docs)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        encoding="utf-8",
        errors="replace",
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert "1 added" in out and "4 skipped" in out, out
    assert "caf\\xe9-\\xff.md: the file name is not valid UTF-8" in out, out
    assert "deep.jsonl: deep.jsonl, line 1: nested too deeply to parse" in out, out
    # pypdf's LimitReachedError is a PyPdfError but not a PdfReadError: it used to abort the run (rc 1)
    assert "bomb.pdf: bomb.pdf: too large to ingest: a compressed stream expands past pypdf's limit" in out, out
    assert "title-only.md: no body text" in out, out


def test_deep_nesting_in_html_and_markdown_does_not_abort_the_run(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deep.html").write_text("<div>" * 100_000 + "x" + "</div>" * 100_000, encoding="utf-8")
    (docs / "deep.md").write_text("> " * 50_000 + "quote\n", encoding="utf-8")
    (docs / "good.md").write_text(GOOD, encoding="utf-8")
    with rag(tmp_path) as app:
        report = app.ingest([docs])
    assert "good.md" in report.added
    assert set(report.added) | set(skipped(report)) == {"good.md", "deep.html", "deep.md"}


def test_links_pipes_devices_and_binary_content_are_reported_and_skipped(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loop-a.md").symlink_to(docs / "loop-b.md")
    (docs / "loop-b.md").symlink_to(docs / "loop-a.md")
    (docs / "dangling.md").symlink_to(docs / "missing.md")
    (docs / "zero.txt").symlink_to("/dev/zero")
    os.mkfifo(docs / "pipe.md")
    (docs / "folder-link").symlink_to(docs)  # a loop back to the folder itself
    (docs / "random.md").write_bytes(random.Random(16).randbytes(200_000))
    (docs / "nul.txt").write_bytes(b"text\x00with a NUL\n")
    (docs / "good.md").write_text(GOOD, encoding="utf-8")
    with rag(tmp_path) as app:
        report = app.ingest([docs])
        assert report.added == ["good.md"]
        reasons = skipped(report)
        assert reasons["loop-a.md"] == "a symbolic link loop" and reasons["loop-b.md"] == "a symbolic link loop"
        assert reasons["dangling.md"].startswith("a dangling symbolic link")
        assert reasons["zero.txt"] == "a device, not a regular file"
        assert reasons["pipe.md"] == "a named pipe (FIFO), not a regular file"
        assert reasons["folder-link"].startswith("a link to a folder, not followed")
        assert reasons["random.md"].startswith("binary content (")
        assert reasons["nul.txt"] == "binary content (NUL bytes), not a text file"
        assert [d.source for d in app.components.corpus.documents()] == ["good.md"]
        # named directly, a link or a pipe is reported the same way instead of "does not exist"
        direct = app.ingest([docs / "pipe.md", docs / "zero.txt"], prune=False)
        assert skipped(direct) == {"pipe.md": reasons["pipe.md"], "zero.txt": reasons["zero.txt"]}


def test_a_file_over_max_file_bytes_is_skipped_as_too_large(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.txt").write_text("Kestrel runs on ARM. " * 1000, encoding="utf-8")  # 21 kB
    (docs / "good.md").write_text(GOOD, encoding="utf-8")
    with rag(tmp_path, max_file_bytes=10_000) as app:
        report = app.ingest([docs])
    assert report.added == ["good.md"]
    assert skipped(report)["big.txt"].startswith("too large: 0.0 MB, more than the 0.0 MB allowed")
