"""Two real documentation trees, chunked as ingest chunks them (no embedding): no chunk is front matter alone, no
chunk holds a shortcode, a template tag or an HTML tag outside code, every chunk of table rows has its header.

The trees are ../shared/bench/realdocs-dev/{loki,traefik} (grafana/loki docs, AGPL-3.0-only; traefik/traefik docs,
MIT), which CI's machine has beside the repository; elsewhere the test is skipped.
"""

from __future__ import annotations

import re

import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.parsers import parse_file
from anaphora.settings import Settings
from tests.conftest import ROOT

pytestmark = [pytest.mark.unit, pytest.mark.slow]

REALDOCS = next(
    (p for p in (b / "shared" / "bench" / "realdocs-dev" for b in (ROOT.parent, ROOT.parent.parent)) if p.is_dir()),
    None,
)
CORPORA = ("loki", "traefik")

_CODE = re.compile(r"^\s*(```|~~~).*?^\s*(```|~~~)\s*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_SHORTCODE = re.compile(r"\{\{[<%]|[>%]\}\}|\{%-?\s*[\w-]+|\s-?%\}")
# a real tag: a known HTML element name or a capitalised JSX component, with optional attributes
_TAG = re.compile(
    r"</?(?:a|img|br|div|span|p|table|tr|td|th|details|summary|sup|sub|b|i|em|strong|code|pre|link|script|style|"
    r"iframe|h[1-6]|ul|ol|li|hr|center|font|[A-Z][a-z]+[A-Za-z]*)(?:\s+[\w:-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*\s*/?>"
)
_FRONT_MATTER_LINE = re.compile(r"^(?:title|description|weight|aliases|menuTitle|keywords)\s*[:=]", re.MULTILINE)
_DELIMITER_ROW = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")
_INLINE_DELIMITER = re.compile(r"\|\s*:?-{3,}")


def prose(text: str) -> str:
    """The chunk without its code blocks and code spans: placeholders such as `<namespace>` are text there."""
    return _CODE_SPAN.sub("", _CODE.sub("", text))


def table_rows_outside_code(text: str) -> list[list[str]]:
    """Each run of consecutive table lines outside code blocks."""
    runs: list[list[str]] = []
    in_code = False
    previous_row = False
    for line in text.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
            previous_row = False
            continue
        # a pipe table the parser rejected (a malformed delimiter row) is a paragraph: one line holding "| ---"
        rejected = bool(_INLINE_DELIMITER.search(line)) and not _DELIMITER_ROW.match(line.replace(" ", ""))
        row = not in_code and line.startswith("|") and not rejected
        if row:
            if not previous_row:
                runs.append([])
            runs[-1].append(line)
        previous_row = row
    return runs


@pytest.fixture(scope="module", params=CORPORA)
def corpus_chunks(request) -> tuple[str, list]:
    if REALDOCS is None:
        pytest.skip("../shared/bench/realdocs-dev is not on this machine (it is on CI's)")
    settings = Settings()
    count = HashingEmbedder().count_tokens
    chunks = []
    for path in sorted((REALDOCS / request.param).rglob("*.md")):
        if path.name == "SOURCE.md":
            continue
        document = parse_file(path)
        for chunk in chunk_sections(
            document.sections, size=settings.ingest.chunk_tokens, overlap=settings.ingest.chunk_overlap, count=count
        ):
            chunks.append((path.relative_to(REALDOCS).as_posix(), chunk))
    return request.param, chunks


def test_the_corpus_is_chunked(corpus_chunks):
    name, chunks = corpus_chunks
    assert len({source for source, _ in chunks}) > 150, name


def test_no_chunk_is_front_matter(corpus_chunks):
    _, chunks = corpus_chunks
    offenders = [(s, c.text[:80]) for s, c in chunks if len(_FRONT_MATTER_LINE.findall(c.text)) >= 2]
    assert not offenders, offenders[:5]


def test_no_chunk_holds_a_shortcode_or_template_tag(corpus_chunks):
    _, chunks = corpus_chunks
    offenders = [(s, m.group(0)) for s, c in chunks if (m := _SHORTCODE.search(prose(c.text)))]
    assert not offenders, offenders[:5]


def test_no_chunk_holds_an_html_tag(corpus_chunks):
    _, chunks = corpus_chunks
    offenders = [(s, m.group(0)) for s, c in chunks if (m := _TAG.search(prose(c.text)))]
    assert not offenders, offenders[:5]


def test_every_table_chunk_has_its_header(corpus_chunks):
    _, chunks = corpus_chunks
    offenders = []
    for source, chunk in chunks:
        for run in table_rows_outside_code(chunk.text):
            if len(run) < 2 or not _DELIMITER_ROW.match(run[1].replace(" ", "")):
                offenders.append((source, run[0][:80]))
    assert not offenders, offenders[:5]
