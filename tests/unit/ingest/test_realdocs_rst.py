"""A real Sphinx tree ingested as a user ingests it (SQLite store, hashing embedder): no chunk holds a directive, a
role's markup, a toctree or a docutils message outside code, and every chunk of table rows has its header.

The tree is ../shared/bench/realdocs-dev/celery (celery/celery docs/, CC BY-SA 4.0: 231 .rst pages with Celery's
own roles and directives, .txt includes and .html "Moved" stubs written in reStructuredText), which CI's machine
has beside the repository; elsewhere the test is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anaphora.app import build_components
from anaphora.settings import Settings
from tests.unit.ingest.test_realdocs import _DELIMITER_ROW, REALDOCS, prose, table_rows_outside_code

pytestmark = [pytest.mark.unit, pytest.mark.slow, pytest.mark.usefixtures("isolated_env")]

_DIRECTIVE = re.compile(r"(?m)^\s*\.\. \S|\.\. [\w:-]+::")  # a directive, a comment, a target
_ROLE = re.compile(r":[\w:.+-]+:`")  # :ref:`x`, :setting:`x`, :py:meth:`x`
_MESSAGE = re.compile(r"\(ERROR/\d\)|\(WARNING/\d\)|System Message|Unknown (?:directive|interpreted text role)")


@pytest.fixture(scope="module")
def celery_chunks(tmp_path_factory) -> list[tuple[str, str]]:
    if REALDOCS is None:
        pytest.skip("../shared/bench/realdocs-dev is not on this machine (it is on CI's)")
    data = tmp_path_factory.mktemp("celery-index")
    components = build_components(Settings(data_dir=data, embedder="hashing", chat_model="fake"))
    try:
        report = components.ingestor.run([REALDOCS / "celery"])
        assert not [s for s in report.skipped if not s[1].startswith("no body text")], report.skipped
        rows = components.database.query(
            "SELECT d.source, c.text FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.key"
        )
    finally:
        components.database.close()
    return [(r["source"], r["text"]) for r in rows if Path(r["source"]).name != "SOURCE.md"]


def test_the_whole_tree_is_ingested(celery_chunks):
    sources = {source for source, _ in celery_chunks}
    assert len([s for s in sources if s.endswith(".rst")]) > 80  # autodoc stubs and toctree pages have no text
    assert any(s.endswith(".txt") for s in sources)
    assert len(celery_chunks) > 1500


@pytest.mark.parametrize(("what", "pattern"), [("directive", _DIRECTIVE), ("role", _ROLE), ("message", _MESSAGE)])
def test_no_chunk_holds_markup_outside_code(celery_chunks, what, pattern):
    """Code blocks are quoted as Sphinx renders them: one changelog code block swallows a paragraph (an
    indentation slip in the source), and Sphinx shows its ``:func:`` as code too."""
    offenders = [(s, m.group(0)) for s, text in celery_chunks if (m := pattern.search(prose(text)))]
    assert not offenders, offenders[:5]


def test_no_chunk_holds_a_toctree(celery_chunks):
    offenders = [(s, text[:80]) for s, text in celery_chunks if "toctree" in text or ":maxdepth:" in text]
    assert not offenders, offenders[:5]


def test_every_table_chunk_has_its_header(celery_chunks):
    offenders = []
    for source, text in celery_chunks:
        for run in table_rows_outside_code(text):
            if len(run) < 2 or not _DELIMITER_ROW.match(run[1].replace(" ", "")):
                offenders.append((source, run[0][:80]))
    assert not offenders, offenders[:5]


def test_a_setting_is_found_under_its_heading(celery_chunks):
    chunk = next(t for s, t in celery_chunks if "only supported when using Redis as the broker" in t)
    assert "worker_disable_prefetch" in chunk or "prefetch" in chunk
