"""Ingest a documentation site from its URL, and re-sync it: fetch what changed, remove what disappeared, keep the
index whole through an outage or a redesign.

What a second run costs: a page whose sitemap ``lastmod`` is unchanged is not requested; the others are requested
with their ``ETag`` / ``Last-Modified`` (a 304 costs no download); a page downloaded again whose extracted text hashes
the same writes nothing. A page is removed only on evidence: HTTP 404/410, or its absence from a sitemap read whole.
One that is unreachable, now empty or a JavaScript shell keeps its indexed version. A run that would remove more than
``sync_max_delete_share`` of the site's indexed pages removes none unless ``allow_mass_delete``; a run that cannot
read robots.txt or the sitemap (the site is down) changes nothing at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace

import httpx

from anaphora.ingest.crawl import Visit, crawl_limits, crawl_site
from anaphora.ingest.extract import ExtractedPage
from anaphora.ingest.ingestor import Ingestor, IngestReport
from anaphora.ingest.parsers import ParsedDocument
from anaphora.ingest.site import GONE, Discovery, Fetched, SiteScope, SiteUnreachable, normalize
from anaphora.settings import SiteSettings
from anaphora.store.protocols import DocumentRegistry
from anaphora.store.sources import Source, SourcePage, SourceRegistry


@dataclass
class SiteReport(IngestReport):
    """An ingest report with what the crawl did: requests made, pages downloaded, pages kept as they were."""

    url: str = ""
    requests: int = 0
    downloaded: int = 0
    kept: list[tuple[str, str]] = field(default_factory=list)  # (url, why its indexed version was kept)
    error: str | None = None  # the site could not be read: nothing changed


@dataclass
class _Outcomes:
    """The crawl's pages sorted into what the index does with them."""

    documents: dict[str, tuple[str, ExtractedPage]] = field(default_factory=dict)  # url: (source, page)
    pages: dict[str, SourcePage] = field(default_factory=dict)  # url: the page's state to store
    gone: dict[str, str] = field(default_factory=dict)  # indexed url: why it is to be removed


def _key(page: ExtractedPage, fetched: Fetched, scope: SiteScope) -> str:
    """The page's identity: its canonical URL when that is on the site, else where its redirects ended."""
    if page.canonical and scope.same_site(page.canonical):
        return normalize(page.canonical)
    return normalize(fetched.final_url)


class _Sorter:
    """Sorts the visits of one crawl: new or changed documents, unchanged pages, pages kept, skipped or gone."""

    def __init__(self, previous: dict[str, SourcePage], scope: SiteScope, report: SiteReport) -> None:
        self.previous, self.scope, self.report = previous, scope, report
        self.out = _Outcomes()
        self.texts: dict[str, str] = {}  # text hash: the url indexed with it
        self.now = time.time()

    def sort(self, visits: list[Visit]) -> _Outcomes:
        for visit in visits:
            fetched, before = visit.fetched, self.previous.get(visit.url)
            if fetched is not None and fetched.status == 200:
                self.report.downloaded += 1
            if fetched is None or fetched.status == 304:
                self._unchanged(visit, before)
                continue
            problem = fetched.problem or (visit.page.problem if visit.page else "no content")
            if problem is None and visit.page is not None:
                problem = self._document(visit, visit.page, fetched)
                if problem is None:
                    continue
            self._not_indexed(visit, before, fetched, problem)
        return self.out

    def _unchanged(self, visit: Visit, before: SourcePage | None) -> None:
        if before is None:
            return
        lastmod = visit.lastmod or before.lastmod
        if before.source:
            why = "sitemap lastmod unchanged" if visit.fetched is None else "not modified (HTTP 304)"
            before = replace(before, outcome="unchanged", reason=why)
        self.out.pages[visit.url] = replace(before, checked_at=self.now, lastmod=lastmod)
        if before.source:
            self.report.unchanged.append(before.source)
        elif before.outcome == "skipped":
            self.report.skipped.append((visit.url, before.reason))

    def _document(self, visit: Visit, page: ExtractedPage, fetched: Fetched) -> str | None:
        """Take the page as a document, or say whose duplicate it is (None: taken, or already taken as itself)."""
        key = _key(page, fetched, self.scope)
        if key == visit.url and key in self.out.documents:  # reached first through a redirect or an alias
            self.out.pages[key] = replace(self.out.pages[key], lastmod=visit.lastmod)
            return None
        other = key if key in self.out.documents else self.texts.get(page.text_hash)
        if other:
            self._skip(visit, f"duplicate of {other}")
            return "duplicate of another page (its canonical URL or the same text)"
        self.texts[page.text_hash] = key
        source = self.scope.source(key)
        self.out.documents[key] = (source, page)
        self.out.pages[key] = SourcePage(
            key,
            source,
            page.title,
            page.anchors,
            "indexed",
            "",
            fetched.etag,
            fetched.last_modified,
            visit.lastmod,
            self.now,
        )
        if key != visit.url:
            self._skip(visit, f"the same page as {key} (a redirect or its canonical URL)")
            self.out.pages[key] = replace(self.out.pages[key], lastmod=None)  # its own sitemap entry sets it
        return None

    def _not_indexed(self, visit: Visit, before: SourcePage | None, fetched: Fetched, problem: str) -> None:
        if before is not None and before.source:
            if fetched.status in GONE:
                self.out.gone[visit.url] = f"gone (HTTP {fetched.status})"
                return
            self.report.kept.append((visit.url, f"{problem}; the indexed version is kept"))
            self.out.pages[visit.url] = replace(before, outcome="kept", reason=problem, checked_at=self.now)
            return
        self.report.skipped.append((visit.url, problem))
        if visit.url not in self.out.pages:
            self._skip(visit, problem)

    def _skip(self, visit: Visit, reason: str) -> None:
        """Record a page that is not indexed, with its validators: the next sync asks whether it changed."""
        fetched = visit.fetched
        ok = fetched is not None and fetched.status == 200
        self.out.pages[visit.url] = SourcePage(
            visit.url,
            outcome="skipped",
            reason=reason,
            etag=fetched.etag if ok and fetched else None,
            last_modified=fetched.last_modified if ok and fetched else None,
            lastmod=visit.lastmod,
            checked_at=self.now,
        )


def _documents(out: _Outcomes) -> Iterator[tuple[str, str, ParsedDocument]]:
    for source, page in out.documents.values():
        yield source, page.text_hash, ParsedDocument(sections=page.sections, metadata={"title": page.title})


class SiteSync:
    """Ingests a site, or brings an ingested one up to date (``anaphora ingest URL``, ``anaphora sync``)."""

    def __init__(
        self,
        ingestor: Ingestor,
        corpus: DocumentRegistry,
        registry: SourceRegistry,
        settings: SiteSettings,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``transport``: how requests reach the site (a proxy's, or a test's); None: the network."""
        self.ingestor, self.corpus, self.registry = ingestor, corpus, registry
        self.settings, self.transport = settings, transport

    def run(self, url: str, *, allow_mass_delete: bool = False, force: bool = False) -> SiteReport:
        started = time.perf_counter()
        scope = SiteScope.of(url)
        report = SiteReport(url=scope.root)
        present = {d.source for d in self.corpus.documents() if d.root == scope.root}
        # a page whose document is gone (deleted through the API) is fetched again as a new one
        previous = {p.url: p for p in self.registry.pages(scope.root) if not p.source or p.source in present}
        limits = crawl_limits(self.settings)
        try:
            discovery, visits, fetcher = asyncio.run(
                crawl_site(url, limits, previous, force=force, transport=self.transport)
            )
        except SiteUnreachable as exc:
            report.error = f"the site could not be read ({exc}); the index is unchanged"
            self._record(scope, report, synced=False)
            report.seconds = time.perf_counter() - started
            return report
        report.requests = fetcher.requests
        report.warnings.extend((scope.root, note) for note in discovery.notes)
        report.skipped.extend((u, "disallowed by robots.txt") for u in discovery.disallowed)
        out = _Sorter(previous, scope, report).sort(visits)
        for url in discovery.disallowed:
            out.pages[url] = SourcePage(
                url, outcome="skipped", reason="disallowed by robots.txt", checked_at=time.time()
            )
        self._absent(discovery, visits, previous, out)
        self.ingestor.write_parsed(scope.root, _documents(out), report, force=force)
        removed = self._remove(scope, previous, out, report, allow_mass_delete)
        self.registry.put_pages(scope.root, out.pages.values(), drop=removed)
        self._record(scope, report, synced=True)
        report.seconds = time.perf_counter() - started
        return report

    @staticmethod
    def _absent(discovery: Discovery, visits: list[Visit], previous: dict[str, SourcePage], out: _Outcomes) -> None:
        """Indexed pages a sitemap read whole no longer lists are gone."""
        if not (discovery.from_sitemap and discovery.complete):
            return
        visited = {v.url for v in visits} | set(out.pages)
        for url, page in previous.items():
            if page.source and url not in visited and url not in discovery.pages:
                out.gone[url] = "no longer in the sitemap"

    def _remove(
        self, scope: SiteScope, previous: dict[str, SourcePage], out: _Outcomes, report: SiteReport, allow: bool
    ) -> list[str]:
        """Remove the gone pages' documents, unless they are more than the share a sync may remove."""
        indexed = sum(1 for p in previous.values() if p.source)
        share = self.settings.sync_max_delete_share
        if out.gone and not allow and len(out.gone) > share * indexed:
            report.warnings.append(
                (
                    scope.root,
                    f"refused to remove {len(out.gone)} of {indexed} indexed pages (more than {share:.0%}); "
                    "check the site, then run again with --allow-mass-delete if they are really gone",
                )
            )
            for url, why in out.gone.items():
                report.kept.append((url, f"{why}; removal refused"))
                out.pages[url] = replace(previous[url], outcome="kept", reason=f"{why}; removal refused")
            return []
        sources = [(scope.root, previous[url].source) for url in out.gone]
        self.corpus.remove_documents(sources)
        report.removed.extend(previous[url].source for url in out.gone)
        return list(out.gone)

    def _record(self, scope: SiteScope, report: SiteReport, *, synced: bool) -> None:
        existing = {s.root: s for s in self.registry.sources()}.get(scope.root)
        summary = summarize(report)
        self.registry.save_source(
            Source(
                root=scope.root,
                kind="site",
                base_url=scope.root,
                synced_at=time.time() if synced else (existing.synced_at if existing else None),
                report=summary,
            )
        )


def summarize(report: IngestReport) -> dict:
    """The counts a source keeps of its last run (the API's and the page's "last sync")."""
    counts = {k: len(v) for k, v in asdict(report).items() if isinstance(v, list)}
    extra = {k: v for k, v in asdict(report).items() if isinstance(v, int | float | str) or v is None}
    return {**counts, **extra}
