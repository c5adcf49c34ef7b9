"""Ingest progress where nobody watches a terminal (issue 25): `anaphora ingest` piped to a file printed nothing
until its end. Now a line goes to stderr every --progress-every seconds (files, chunks, rate, ETA), and the summary
groups the skipped files by reason and type, naming them only with --verbose."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from anaphora.cli.progress import IngestProgress, duration
from anaphora.ingest.skips import group_skipped, reason_head

pytestmark = pytest.mark.unit
LINE = re.compile(r"ingest: (\d+)/(\d+) files read")


def environment(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
    }


def docs_tree(root: Path, files: int) -> Path:
    for n in range(files):
        folder = root / f"part-{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(
            f"Kestrel note {n}.{k}: the agent ships logs to the collector on port {9000 + k}." for k in range(30)
        )
        (folder / f"page-{n:04d}.md").write_text(f"# Page {n}\n\n{body}\n", encoding="utf-8")
    return root


def test_ingest_piped_to_a_file_prints_progress_lines_before_the_summary(tmp_path: Path) -> None:
    docs = docs_tree(tmp_path / "docs", 300)
    log = tmp_path / "ingest.log"
    with log.open("w") as out:  # `anaphora ingest docs > ingest.log 2>&1`: one file, in the order written
        result = subprocess.run(
            [sys.executable, "-m", "anaphora", "ingest", "--progress-every", "0.05", str(docs)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment(tmp_path),
            cwd=tmp_path,
            timeout=300,
        )
    text = log.read_text()
    assert result.returncode == 0, text
    lines = text.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("Ingested in"))
    progress = [(i, line) for i, line in enumerate(lines) if LINE.match(line)]
    assert progress and progress[0][0] < summary, text
    partial = [line for _, line in progress if int(LINE.match(line)[1]) < int(LINE.match(line)[2])]
    assert partial, f"no line shows a run still going: {text}"
    assert "\x1b" not in text and "━" not in text  # no bar, no terminal codes in a file
    embedding = [line for _, line in progress if "chunks embedded" in line]
    assert not embedding or all("chunks/s" in line and "ETA" in line for line in embedding[1:]), embedding


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_progress_line_has_files_chunks_rate_and_eta_at_the_interval() -> None:
    stream, clock = io.StringIO(), Clock()
    console = Console(file=stream, force_terminal=False, width=200)
    with IngestProgress(console, every_s=5.0, clock=clock) as progress:
        progress.files(10, 40)  # at 0 s: no line yet
        clock.now = 6.0
        progress.files(40, 40)
        progress.chunks(0, 1000)
        clock.now = 16.0
        progress.chunks(250, 1000)  # 25 chunks/s over 10 s: 30 s to go
        clock.now = 17.0
        progress.chunks(260, 1000)  # within 5 s of the last line: none
    lines = stream.getvalue().splitlines()
    assert lines == [
        "ingest: 40/40 files read, 6 s so far",
        "ingest: 40/40 files read, 250/1,000 chunks embedded, 25.0 chunks/s, ETA 30 s, 16 s so far",
    ]


def test_durations_read_as_minutes_and_hours() -> None:
    assert [duration(s) for s in (0.4, 52, 190, 3 * 3600 + 300)] == ["0 s", "52 s", "3 min 10 s", "3 h 05 min"]


def test_skipped_files_are_grouped_by_reason_and_type() -> None:
    skipped = [
        ("docs/a.png", "unsupported file type .png"),
        ("docs/b.png", "unsupported file type .png"),
        ("docs/c.svg", "unsupported file type .svg"),
        ("docs/x.pdf", "x.pdf: not a readable PDF (EOF marker not found)"),
        ("docs/y.pdf", "y.pdf: not a readable PDF (Stream has ended unexpectedly)"),
        ("docs/n.jsonl", "n.jsonl, line 3: not a passage record ('id')"),
        ("docs/t.md", "no body text (only headings or markup)"),
        ("docs/big.txt", "too large: 31.2 MB, more than the 30.0 MB allowed (raise the max_file_bytes setting)"),
    ]
    groups = {g.reason: (g.count, dict(g.types)) for g in group_skipped(skipped)}
    assert groups == {
        "unsupported file type": (3, {".png": 2, ".svg": 1}),
        "not a readable PDF": (2, {".pdf": 2}),
        "not a passage record": (1, {".jsonl": 1}),
        "no body text": (1, {".md": 1}),
        "too large": (1, {".txt": 1}),
    }
    assert reason_head("a.md", "a symbolic link loop") == "a symbolic link loop"


def test_the_summary_names_skipped_files_only_with_verbose(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nKestrel keeps logs safe.\n", encoding="utf-8")
    for name in ("one.png", "two.png", "logo.svg"):
        (docs / name).write_bytes(b"\x89PNG")
    (docs / "title-only.md").write_text("# Only a title\n", encoding="utf-8")

    def ingest(*flags: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "anaphora", "ingest", *flags, str(docs)],
            capture_output=True, text=True, env=environment(tmp_path), cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout

    grouped = ingest()
    assert "skipped 3 files: unsupported file type (.png 2, .svg 1)" in grouped, grouped
    assert "skipped 1 file: no body text (.md 1)" in grouped, grouped
    assert "one.png" not in grouped and "title-only.md" not in grouped
    named = ingest("--verbose")
    assert "one.png: unsupported file type .png" in named and "title-only.md: no body text" in named, named
