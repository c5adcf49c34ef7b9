"""Bounds on what one file may cost (issue 16, defect 4): the chunker was superlinear on long lines (each word of
a piece re-counted the whole piece) and counted whole paragraphs at once (a tokenizer holding every token of
megabytes); PDFs had no expansion or time limit; and the limits must hold behind POST /v1/documents too."""

from __future__ import annotations

import random
import time
from pathlib import Path

import httpx
import pytest

from anaphora.app import Anaphora
from anaphora.ingest.chunker import MAX_CHARS_PER_TOKEN, chunk_section
from anaphora.ingest.parsers import ParseLimits, Section, parse_pdf
from anaphora.settings import Settings
from tests.documents import make_pdf
from tests.server_harness import bearer, components_for, serve, settings_for

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]
WORDS = "kestrel install helm chart kubernetes arm node cluster upgrade version".split()


class MeteredCounter:
    """A word-count tokenizer that records how many characters it was asked to count, and the longest text."""

    def __init__(self) -> None:
        self.work = 0
        self.longest = 0

    def __call__(self, text: str) -> int:
        self.work += len(text)
        self.longest = max(self.longest, len(text))
        return len(text.split())


def soup(n_words: int, separator: str = " ") -> str:
    rng = random.Random(4)
    return separator.join(rng.choice(WORDS) for _ in range(n_words))


@pytest.mark.parametrize("separator", [" ", "\n"])
def test_chunking_a_long_line_is_linear_and_never_counts_a_huge_text(separator: str) -> None:
    works = []
    for n_words in (20_000, 80_000):
        text = soup(n_words, separator)
        counter = MeteredCounter()
        chunks = chunk_section(Section([], text), size=200, overlap=40, count=counter)
        assert all(len(c.text.split()) <= 200 for c in chunks)
        assert " ".join(c.text for c in chunks).split()[:50] == text.split()[:50]
        assert counter.longest <= 200 * MAX_CHARS_PER_TOKEN * 2
        works.append(counter.work / len(text))
    # characters counted per character of input: a constant, about 3 (it was about 100, re-counting at every word)
    assert works[1] < works[0] * 1.5 and works[1] < 10, works


def test_a_word_longer_than_a_chunk_is_cut_at_characters() -> None:
    chunks = chunk_section(Section([], "x" * 100_000), size=50, overlap=0, count=lambda t: (len(t) + 3) // 4)
    assert len(chunks) > 1 and all(c.tokens <= 50 for c in chunks)
    assert "".join(c.text.replace("\n", "") for c in chunks) == "x" * 100_000


def big_pdf(tmp_path: Path, pages_of_text: int) -> Path:
    path = tmp_path / "big.pdf"
    path.write_bytes(make_pdf("Kestrel installs with Helm. " * pages_of_text))
    return path


def test_a_pdf_that_expands_past_max_pdf_chars_is_refused(tmp_path: Path) -> None:
    path = big_pdf(tmp_path, 200)  # about 5.6k characters of text
    assert parse_pdf(path, ParseLimits(max_pdf_chars=100_000))
    with pytest.raises(Exception, match="too large to ingest") as refused:
        parse_pdf(path, ParseLimits(max_pdf_chars=1_000))
    assert "max_pdf_chars" in refused.value.hint


def test_a_pdf_over_max_pdf_seconds_is_skipped_in_the_report(tmp_path: Path, monkeypatch) -> None:
    import anaphora.ingest.parsers as parsers

    clock = iter(range(0, 10_000, 100))  # every look at the clock: 100 s later
    monkeypatch.setattr(parsers.time, "monotonic", lambda: next(clock))
    docs = tmp_path / "docs"
    docs.mkdir()
    big_pdf(docs, 10)
    (docs / "good.md").write_text("# Kestrel\n\nKestrel installs with Helm.\n", encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", max_pdf_seconds=60)
    with Anaphora(settings) as rag:
        report = rag.ingest([docs])
    assert report.added == ["good.md"]
    [(path, reason)] = report.skipped
    assert path.endswith("big.pdf") and "took over 60 s" in reason


def finished(admin, job_id: str) -> dict:
    for _ in range(400):
        job = admin.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_the_file_limit_holds_behind_post_v1_documents(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, max_file_bytes=1_000)
    folder = tmp_path / "server-docs"
    folder.mkdir()
    (folder / "big.md").write_text("# Big\n\n" + soup(2_000) + "\n", encoding="utf-8")
    with (
        serve(settings, components_for(settings, ingest=False)) as running,
        httpx.Client(base_url=running.url, headers=bearer("root", scope="admin"), timeout=30) as admin,
    ):
        by_path = finished(admin, admin.post("/v1/documents", json={"path": str(folder)}).json()["job_id"])
        upload = admin.post("/v1/documents", files={"files": ("up.md", b"# Up\n\n" + b"word " * 400)}).json()
        uploaded = finished(admin, upload["job_id"])
    assert by_path["status"] == "done" and by_path["report"]["added"] == []
    [skipped] = by_path["report"]["skipped"]
    assert skipped["path"].endswith("big.md") and skipped["reason"].startswith("too large")
    assert uploaded["report"]["added"] == [] and uploaded["report"]["skipped"][0]["reason"].startswith("too large")


@pytest.mark.parametrize("separator", [" ", "\n", "  "])
def test_long_line_chunks_keep_every_word_in_order(separator: str) -> None:
    text = soup(30_000, separator) + separator + "x" * 5_000 + separator + "tail words here"
    chunks = chunk_section(Section([], text), size=50, overlap=0, count=lambda t: len(t.split()))
    assert all(len(c.text.split()) <= 50 for c in chunks)
    assert "".join("".join(c.text.split()) for c in chunks) == "".join(text.split())
