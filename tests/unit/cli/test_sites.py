"""The CLI's published sources: `ingest URL` crawls a served site and reports pages by outcome and reason,
`--verbose` names them, `sync` re-syncs every source, `sources` lists them; `--base-url` gives answers' sources a
link (OSC 8 on a terminal, the URL as text elsewhere)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from anaphora.cli.render import link, print_sources
from anaphora.types import Citation, TurnResult, TurnTrace
from tests.conftest import SAMPLE_DOCS
from tests.docs_site import DocsSite, server
from tests.local_http import serving
from tests.unit.cli.test_main import run
from tests.unit.ingest.test_site_sync import CORPUS

pytestmark = pytest.mark.unit
FAST = {"ANAPHORA_CRAWL_DELAY_S": "0"}


def test_ingest_a_site_then_sync_and_list_it(tmp_path: Path) -> None:
    if CORPUS is None:
        pytest.skip("the realdocs-dev corpora are not beside the repository")
    docs = DocsSite(CORPUS)
    with serving(server(docs)) as base:
        first = run(tmp_path, "ingest", f"{base}/docs/", env=FAST)
        assert first.returncode == 0, first.stderr
        assert "7 added" in first.stdout and "JavaScript shell" in first.stdout and "robots.txt" in first.stdout
        assert "--verbose names each" in first.stdout and "/docs/app/" not in first.stdout
        docs.changed = True
        again = run(tmp_path, "sync", "--verbose", env=FAST)
        assert again.returncode == 0, again.stderr
        assert "1 updated" in again.stdout and "6 unchanged" in again.stdout and f"{base}/docs/app/" in again.stdout
        listed = run(tmp_path, "sources")
    assert f"site   {base}/docs/" in listed.stdout and "last sync 20" in listed.stdout


def test_an_answer_links_its_sources_to_the_published_pages(tmp_path: Path) -> None:
    base = "https://docs.example.com/kestrel/"
    assert run(tmp_path, "ingest", "--base-url", base, "--generator", "mkdocs", str(SAMPLE_DOCS)).returncode == 0
    result = run(tmp_path, "ask", "How do I install Kestrel with Helm on Kubernetes?")
    assert result.returncode == 0, result.stderr
    assert base + "install-kubernetes/" in result.stdout


def test_a_terminal_gets_an_osc8_hyperlink_and_a_hostile_url_none() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    citation = Citation(id="a#1", source="a.md", heading="A", url="https://docs.example.com/a/#b")
    print_sources(
        console, TurnResult.model_construct(citations=[citation], trace=TurnTrace.model_construct(retrieved=[]))
    )
    assert "\x1b]8;" in out.getvalue() and "https://docs.example.com/a/#b" in out.getvalue()
    assert link("https://x.example/\x1b]8;;evil\x07").style == ""
