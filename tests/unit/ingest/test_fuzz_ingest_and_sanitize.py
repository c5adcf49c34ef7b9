"""Fuzz targets, bounded in time for CI: the ingestion parsers, the chunker and the sanitizer on generated hostile
input must neither crash (only InputError, which the ingestor reports) nor take unbounded time or memory.

The sanitizer cases at the end were found by this target: runs of spaces after "<" and tokens nested in tokens
took a minute for 16k characters (quadratic backtracking, one pass per nesting level)."""

from __future__ import annotations

import contextlib
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anaphora.errors import InputError
from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.parsers import SUPPORTED_SUFFIXES, ParseLimits, parse_file
from anaphora.sanitize import _BOUNDARY, _FOLD, sanitize
from anaphora.special_tokens import all_tokens

pytestmark = pytest.mark.unit
FUZZ = settings(max_examples=150, deadline=2_000, database=None, suppress_health_check=list(HealthCheck))
TEXT_SUFFIXES = [s for s in SUPPORTED_SUFFIXES if s != ".pdf"]
PIECES = [*all_tokens(), "<", ">", "|", "[", "]", "/", "#", "\n", " ", "{", "}", '"', ":", ",", "\x00", "\x1b",
          "\ufffd", "é", "▁", "｜", "<div>", "</div>", "<p>", "- ", "```", "    ", "# h\n", "\ud800",
          "x" * 50]  # fmt: skip
hostile_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=20), max_size=60).map("".join)


def words(text: str) -> int:
    return len(text.split())


def parse_bytes(data: bytes, suffix: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz{suffix}"
        path.write_bytes(data)
        return parse_file(path, ParseLimits(max_pdf_chars=100_000, max_pdf_seconds=5))


@FUZZ
@given(data=st.binary(max_size=4_000), suffix=st.sampled_from(SUPPORTED_SUFFIXES))
def test_parsers_on_random_bytes_raise_only_input_errors(data: bytes, suffix: str) -> None:
    try:
        document = parse_bytes(data, suffix)
    except InputError:
        return
    assert isinstance(document.is_empty, bool)


@FUZZ
@given(text=hostile_text, suffix=st.sampled_from(TEXT_SUFFIXES))
def test_parsers_and_chunker_on_hostile_text(text: str, suffix: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    try:
        document = parse_bytes(data, suffix)
    except InputError:
        return
    for chunk in chunk_sections(document.sections, size=32, overlap=8, count=words):
        assert chunk.tokens <= 32


@pytest.mark.parametrize("opener", ["[", '{"a":', "<div>", "> ", "- ", "<|"])
@pytest.mark.parametrize("suffix", [".jsonl", ".html", ".md"])
def test_deep_nesting_is_refused_or_parsed_never_a_crash(opener: str, suffix: str) -> None:
    line = opener * (30_000 if suffix == ".html" else 100_000)  # html.parser: 3 s per 100k levels
    data = '{"id": "p", "text": ' + line + "}" if suffix == ".jsonl" else line
    with contextlib.suppress(InputError):
        parse_bytes(data.encode(), suffix)


@FUZZ
@given(text=hostile_text)
def test_sanitizer_output_is_stable_and_holds_no_token(text: str) -> None:
    cleaned = sanitize(text)
    assert _BOUNDARY.search(cleaned.translate(_FOLD)) is None, (text, cleaned)
    assert sanitize(cleaned) == cleaned


@pytest.mark.parametrize(
    "attack",
    [
        "<|" + " " * 16_000,
        "<" + " " * 16_000,
        "\n" * 4_000 + "##" * 4_000,
        "<|a" * 4_000 + "|>" * 4_000,
        "[/" * 5_000 + "INST]" * 5_000,
        "<|" * 5_000 + "x" + "|>" * 5_000,
    ],
)
def test_sanitizer_time_is_bounded_on_adversarial_text(attack: str) -> None:
    started = time.perf_counter()
    cleaned = sanitize(attack)
    assert time.perf_counter() - started < 2.0  # before: 18 to 140 s
    assert _BOUNDARY.search(cleaned.translate(_FOLD)) is None and sanitize(cleaned) == cleaned


def test_parse_and_chunk_memory_grows_with_the_file_not_faster(tmp_path: Path) -> None:
    path = tmp_path / "line.txt"
    path.write_text("kestrel helm chart " * 100_000, encoding="utf-8")  # 1.9 MB on one line
    tracemalloc.start()
    try:
        document = parse_file(path)
        chunk_sections(document.sections, size=200, overlap=40, count=words)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * path.stat().st_size, peak
