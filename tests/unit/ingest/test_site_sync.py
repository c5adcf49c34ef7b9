"""Ingesting a documentation site from its URL, against a real HTTP server on 127.0.0.1 (tests/docs_site.py):
every content page indexed once and nothing of the template in the chunks, robots.txt and the prefix honoured, the
JavaScript shell reported; a second run with no change downloads nothing and writes nothing; a changed page is
re-indexed and a vanished one removed; an outage leaves the index as it was; a mass removal is refused unless
allowed; citations of the site's passages carry the page's URL at the heading."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.docs_site as tests_docs_site
from anaphora import Anaphora
from anaphora.ingest.sources import CitationLinks
from anaphora.ingest.sync import SiteReport
from anaphora.types import Citation
from tests.conftest import ROOT
from tests.docs_site import MARKER, PAGES, DocsSite, server
from tests.local_http import serving

pytestmark = pytest.mark.unit

CORPUS = next(
    (
        p
        for p in (b / "shared" / "bench" / "realdocs-dev" / "traefik" for b in (ROOT.parent, ROOT.parent.parent))
        if p.is_dir()
    ),
    None,
)
CONTENT = [f"/docs/{p}" for p in PAGES] + ["/docs/changing/", "/docs/vanishing/"]


@pytest.fixture
def site():
    if CORPUS is None:
        pytest.skip("the realdocs-dev corpora are not beside the repository")
    docs = DocsSite(CORPUS)
    with serving(server(docs)) as base:
        yield docs, base


@pytest.fixture
def rag(tmp_path: Path):
    with Anaphora(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", crawl_delay_s=0) as rag:
        yield rag


def site_documents(rag: Anaphora, base: str) -> dict[str, str]:
    return {d.source: d.content_hash for d in rag.components.corpus.documents() if d.root.startswith(base)}


def chunk_texts(rag: Anaphora) -> list[str]:
    return [r["heading"] + "\n" + r["text"] for r in rag.components.database.query("SELECT heading, text FROM chunks")]


def reasons(report: SiteReport) -> dict[str, str]:
    return dict(report.skipped)


def test_a_crawl_indexes_each_content_page_once_and_none_of_the_template(site, rag) -> None:
    docs, base = site
    report = rag.ingest_site(f"{base}/docs/")
    assert report.error is None
    assert sorted(report.added) == sorted(p.lstrip("/") for p in CONTENT)
    assert len(site_documents(rag, base)) == len(CONTENT)
    texts = chunk_texts(rag)
    assert texts and not [t for t in texts if MARKER in t or "Edit this page" in t or "Cookie settings" in t]
    assert any("basicAuth" in t or "BasicAuth" in t for t in texts)  # the content itself is there
    requested = docs.requested()
    assert "/docs/private/keys/" not in requested and "/outside/" not in requested
    why = reasons(report)
    assert why[f"{base}/docs/private/keys/"] == "disallowed by robots.txt"
    assert "JavaScript shell" in why[f"{base}/docs/app/"]
    assert why[f"{base}/docs/missing/"] == "HTTP 404"
    assert f"{base}/outside/" not in why  # out of scope: not even reported
    pages = {p.url: p for p in rag.sources.registry.pages(f"{base}/docs/")}
    assert pages[f"{base}/docs/old-tracing/"].outcome == "skipped"  # the redirect, folded into its target
    assert pages[f"{base}/docs/tracing/"].outcome == "indexed"
    alias = pages[f"{base}/docs/overview/index.html"]  # folded into the page its canonical link names
    assert alias.outcome == "skipped" and alias.reason == f"duplicate of {base}/docs/overview/"


def test_without_lastmod_a_resync_asks_conditionally_and_a_304_writes_nothing(site, rag) -> None:
    docs, base = site
    docs.lastmod = False
    rag.ingest_site(f"{base}/docs/")
    generation, before = rag.components.corpus.generation(), len(docs.log)
    report = rag.ingest_site(f"{base}/docs/")
    statuses = {path: status for path, status in docs.log[before:] if path in CONTENT}
    assert statuses == dict.fromkeys(CONTENT, 304)  # each page asked with its ETag, none downloaded
    assert report.downloaded == 0 and report.chunks_written == 0
    assert rag.components.corpus.generation() == generation
    pages = rag.sources.registry.pages(f"{base}/docs/")
    assert {p.reason for p in pages if p.source} == {"not modified (HTTP 304)"}


def test_a_second_run_with_no_change_downloads_nothing_and_writes_nothing(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    generation = rag.components.corpus.generation()
    before = len(docs.log)
    report = rag.ingest_site(f"{base}/docs/")
    fetched = docs.requested(before)
    assert not [p for p in fetched if p.startswith("/docs/")], fetched  # robots.txt and the sitemaps only
    assert report.downloaded == 0 and report.chunks_written == 0 and not report.added and not report.removed
    assert sorted(report.unchanged) == sorted(p.lstrip("/") for p in CONTENT)
    assert rag.components.corpus.generation() == generation


def test_a_changed_page_is_reindexed_and_a_vanished_one_removed(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    docs.changed = docs.vanished = True
    before = len(docs.log)
    report = rag.ingest_site(f"{base}/docs/")
    assert report.updated == ["docs/changing/"]
    assert report.removed == ["docs/vanishing/"]
    assert [p for p in docs.requested(before) if p.startswith("/docs/")] == ["/docs/changing/"]
    documents = site_documents(rag, base)
    assert "docs/vanishing/" not in documents and "docs/changing/" in documents
    texts = chunk_texts(rag)
    assert any("every month" in t for t in texts) and not any("every quarter" in t for t in texts)
    assert not any("legacy dashboard" in t.lower() for t in texts)


def test_an_outage_leaves_the_index_as_it_was(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    documents, generation = site_documents(rag, base), rag.components.corpus.generation()
    synced = rag.sources.registry.sources()[0].synced_at
    docs.down = True
    report = rag.ingest_site(f"{base}/docs/")
    assert report.error and "503" in report.error
    assert site_documents(rag, base) == documents and rag.components.corpus.generation() == generation
    source = rag.sources.registry.sources()[0]
    assert source.synced_at == synced and source.report["error"]


def test_a_page_that_fails_or_turns_into_a_shell_keeps_its_indexed_version(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    documents = site_documents(rag, base)
    docs.changed, docs.failing = True, {"/docs/changing/"}  # changed, but answers 503
    docs.html["/docs/metrics/"] = tests_docs_site.SHELL  # a redesign that renders in the browser only
    docs.lastmod = False
    report = rag.ingest_site(f"{base}/docs/")
    kept = dict(report.kept)
    assert "503" in kept[f"{base}/docs/changing/"] and "JavaScript shell" in kept[f"{base}/docs/metrics/"]
    assert not report.removed and not report.updated and site_documents(rag, base) == documents
    pages = {p.url: p for p in rag.sources.registry.pages(f"{base}/docs/")}
    assert pages[f"{base}/docs/metrics/"].outcome == "kept" and pages[f"{base}/docs/metrics/"].source


def test_a_sync_that_would_empty_the_index_removes_nothing_unless_allowed(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    documents = site_documents(rag, base)
    docs.redesigned = True  # a redesign gone wrong: its sitemap lists one page, the others answer 404
    refused = rag.ingest_site(f"{base}/docs/")
    assert not refused.removed and any("refused to remove" in w for _, w in refused.warnings)
    assert site_documents(rag, base).keys() == documents.keys()
    allowed = rag.ingest_site(f"{base}/docs/", allow_mass_delete=True)
    assert len(allowed.removed) == len(PAGES) + 1  # the five pages and the vanished one
    assert set(site_documents(rag, base)) == {"docs/changing/"}


def test_citations_of_crawled_pages_open_the_page_at_the_heading(site, rag) -> None:
    docs, base = site
    rag.ingest_site(f"{base}/docs/")
    row = rag.components.database.query(
        "SELECT c.id, c.heading FROM chunks c JOIN documents d ON d.id = c.document_id "
        "WHERE d.source = 'docs/middlewares/basicauth/' AND c.heading LIKE '%>%' LIMIT 1"
    )[0]
    [citation] = CitationLinks(rag.sources.registry)(
        [Citation(id=row["id"], source="docs/middlewares/basicauth/", heading=row["heading"])]
    )
    assert citation.url and citation.url.startswith(f"{base}/docs/middlewares/basicauth/#")
    anchor = citation.url.split("#", 1)[1]
    assert f'id="{anchor}"' in docs.html["/docs/middlewares/basicauth/"]


def test_without_a_sitemap_links_under_the_prefix_are_followed(site, rag) -> None:
    docs, base = site
    docs.sitemap = False
    report = rag.ingest_site(f"{base}/docs/tracing/")  # the prefix is /docs/tracing/: nothing else is in scope
    assert report.added == ["docs/tracing/"]
    report = rag.ingest_site(f"{base}/docs/")
    assert set(report.added) == {"docs/"} | {f"docs/{p}" for p in PAGES}  # from the home page's links
    requested = docs.requested()
    assert "/docs/private/keys/" not in requested and "/outside/" not in requested
    assert reasons(report)[f"{base}/docs/private/keys/"] == "disallowed by robots.txt"


def test_the_page_limit_stops_a_crawl_and_nothing_is_removed_for_it(site, tmp_path) -> None:
    docs, base = site
    with Anaphora(data_dir=tmp_path / "d", chat_model="fake", embedder="hashing", crawl_delay_s=0) as rag:
        rag.ingest_site(f"{base}/docs/")
    with Anaphora(
        data_dir=tmp_path / "d",
        chat_model="fake",
        embedder="hashing",
        crawl_delay_s=0,
        crawl_max_pages=2,
        crawl_concurrency=1,
    ) as rag:
        docs.vanished = True  # gone from the sitemap, but the sitemap is not read whole this time
        report = rag.ingest_site(f"{base}/docs/")
    assert not report.removed and any("crawl_max_pages = 2" in w for _, w in report.warnings)
