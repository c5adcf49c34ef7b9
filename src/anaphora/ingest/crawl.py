"""One crawl of a documentation site: discovery (robots.txt, sitemaps), then the pages in waves, links followed
when no sitemap lists them. A page whose sitemap ``lastmod`` is what it was at the last sync is not requested; the
others are requested with their ``ETag`` / ``Last-Modified``, and their main text extracted off the event loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from anaphora.ingest.extract import ExtractedPage, extract_page
from anaphora.ingest.parsers import decode
from anaphora.ingest.site import (
    CrawlLimits,
    Discovery,
    Fetched,
    SiteFetcher,
    SiteScope,
    normalize,
    read_robots,
    read_sitemaps,
)
from anaphora.settings import SiteSettings
from anaphora.store.sources import SourcePage

HTML_TYPES = ("text/html", "application/xhtml+xml", "")
SETTLED = ("indexed", "unchanged", "skipped")  # outcomes whose page need not be fetched while its lastmod holds


@dataclass(slots=True)
class Visit:
    url: str
    lastmod: str | None
    fetched: Fetched | None = None  # None: not requested (its lastmod is unchanged)
    page: ExtractedPage | None = None


def crawl_limits(settings: SiteSettings) -> CrawlLimits:
    return CrawlLimits(
        max_pages=settings.crawl_max_pages,
        max_page_bytes=settings.crawl_max_page_bytes,
        max_total_bytes=settings.crawl_max_total_bytes,
        concurrency=settings.crawl_concurrency,
        delay_s=settings.crawl_delay_s,
        timeout_s=settings.crawl_timeout_s,
        user_agent=settings.crawl_user_agent,
    )


class SiteCrawl:
    """One crawl: discovery, then the pages in waves (links followed when no sitemap lists them)."""

    def __init__(self, fetcher: SiteFetcher, previous: dict[str, SourcePage], *, force: bool = False) -> None:
        self.fetcher = fetcher
        self.previous = previous
        self.force = force

    async def run(self, start: str) -> tuple[Discovery, list[Visit]]:
        self.fetcher.robots = await read_robots(self.fetcher)
        discovery = await read_sitemaps(self.fetcher, start)
        queue = list(discovery.pages.items())
        if not discovery.from_sitemap:  # also look again at pages indexed before, to notice the ones gone
            queue += [(url, None) for url in self.previous if url not in discovery.pages]
        seen = {url for url, _ in queue}
        visits: list[Visit] = []
        wave = max(1, self.fetcher.limits.concurrency * 2)
        while queue and len(visits) < self.fetcher.limits.max_pages and not self.fetcher.exhausted:
            batch, queue = queue[:wave], queue[wave:]
            done = await asyncio.gather(*(self.visit(url, lastmod) for url, lastmod in batch))
            visits.extend(done)
            if not discovery.from_sitemap:
                queue += self._links(done, seen, discovery)
        if queue:
            discovery.complete = False
            discovery.notes.append(f"stopped at a limit with {len(queue)} pages left (crawl_max_pages, bytes)")
        return discovery, visits

    def _links(self, done: list[Visit], seen: set[str], discovery: Discovery) -> list[tuple[str, None]]:
        found = []
        for visit in done:
            for link in visit.page.links if visit.page else []:
                url = normalize(link)
                if url in seen or not self.fetcher.scope.contains(url):
                    continue
                seen.add(url)
                if self.fetcher.allowed(url):
                    found.append((url, None))
                else:
                    discovery.disallowed.append(url)
        return found

    async def visit(self, url: str, lastmod: str | None) -> Visit:
        before = self.previous.get(url)
        if before and lastmod and before.lastmod == lastmod and before.outcome in SETTLED and not self.force:
            return Visit(url, lastmod)
        settled = before is not None and not self.force  # its validators ask whether it changed since
        fetched = await self.fetcher.get(
            url, before.etag if settled else None, before.last_modified if settled else None
        )
        visit = Visit(url, lastmod, fetched)
        if fetched.ok and fetched.content_type in HTML_TYPES:
            html, _ = decode(fetched.body)
            visit.page = await asyncio.to_thread(extract_page, html, normalize(fetched.final_url))
        elif fetched.ok:
            fetched.problem = f"not HTML ({fetched.content_type})"
        return visit


async def crawl_site(
    url: str,
    limits: CrawlLimits,
    previous: dict[str, SourcePage],
    *,
    force: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[Discovery, list[Visit], SiteFetcher]:
    """Crawl the site at ``url`` (``transport``: a test's or a proxy's). Raises :class:`SiteUnreachable`."""
    scope = SiteScope.of(url)
    timeout = httpx.Timeout(limits.timeout_s)
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=transport) as client:
        fetcher = SiteFetcher(client, scope, limits)
        discovery, visits = await SiteCrawl(fetcher, previous, force=force).run(normalize(url))
    return discovery, visits, fetcher
