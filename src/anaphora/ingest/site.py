"""Fetching a documentation site politely: its scope (one origin, under a path prefix), robots.txt, sitemaps
(nested indexes, gzip), conditional requests, redirects followed within the site, and limits on pages and bytes.

One :class:`SiteFetcher` holds the crawl's state: a concurrency limit and a least delay between requests (robots.txt
``Crawl-delay`` wins when longer), the bytes spent, and the robots rules. A failure to reach the site (a connection
error, a timeout, HTTP 5xx or 429) is ``unreachable``, never "gone": the sync keeps what it had for that page.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx

from anaphora.errors import InputError

MAX_REDIRECTS = 5
MAX_SITEMAPS = 50
SITEMAP_DEPTH = 3
GONE = (404, 410)


class SiteUnreachable(Exception):
    """The site (its robots.txt or sitemap) could not be read: the sync changes nothing."""


@dataclass(frozen=True, slots=True)
class CrawlLimits:
    max_pages: int = 1000
    max_page_bytes: int = 5 * 1024 * 1024
    max_total_bytes: int = 500 * 1024 * 1024
    concurrency: int = 4
    delay_s: float = 0.2
    timeout_s: float = 20.0
    user_agent: str = "AnaphoraBot/0.1 (docs assistant indexer)"


@dataclass(frozen=True, slots=True)
class SiteScope:
    """What a crawl may index: one origin, paths under ``prefix`` (which ends in ``/``)."""

    origin: str
    prefix: str

    @classmethod
    def of(cls, url: str) -> SiteScope:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"{url!r} is not an http(s) URL", hint="e.g. anaphora ingest https://docs.example.com/")
        path = parts.path or "/"
        if not path.endswith("/"):
            last = path.rsplit("/", 1)[-1]
            path = path.rsplit("/", 1)[0] + "/" if "." in last else path + "/"
        return cls(f"{parts.scheme}://{parts.netloc}".lower(), path)

    @property
    def root(self) -> str:
        return self.origin + self.prefix

    def same_site(self, url: str) -> bool:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}".lower() == self.origin

    def contains(self, url: str) -> bool:
        path = urlsplit(url).path or "/"
        return self.same_site(url) and (path.startswith(self.prefix) or path + "/" == self.prefix)

    def source(self, url: str) -> str:
        """The document name of a page: its path (and query) under the origin, without the leading slash."""
        parts = urlsplit(url)
        name = parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
        return name or "/"


def normalize(url: str) -> str:
    """Without the fragment, with a path (``https://x`` is ``https://x/``), scheme and host lowercase."""
    url = urldefrag(url)[0]
    parts = urlsplit(url)
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


@dataclass(slots=True)
class Fetched:
    """One GET, redirects followed: ``status`` of the last response (0: none), or why it gave nothing."""

    url: str
    final_url: str
    status: int = 0
    body: bytes = b""
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None
    problem: str | None = None
    unreachable: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.problem is None


@dataclass
class SiteFetcher:
    client: httpx.AsyncClient
    scope: SiteScope
    limits: CrawlLimits
    robots: RobotFileParser | None = None
    requests: int = 0
    bytes_read: int = 0
    _last: float = 0.0
    _gate: asyncio.Lock = field(default_factory=asyncio.Lock)
    _slots: asyncio.Semaphore | None = None

    def allowed(self, url: str) -> bool:
        return self.robots is None or self.robots.can_fetch(self.limits.user_agent, url)

    @property
    def exhausted(self) -> bool:
        return self.bytes_read >= self.limits.max_total_bytes

    async def _pace(self) -> None:
        delay = self.limits.delay_s
        if self.robots is not None and (asked := self.robots.crawl_delay(self.limits.user_agent)):
            delay = max(delay, float(asked))
        async with self._gate:
            wait = self._last + delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last = time.monotonic()

    async def get(self, url: str, etag: str | None = None, last_modified: str | None = None) -> Fetched:
        """GET ``url`` (conditionally, given validators), following redirects that stay on the site."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.concurrency)
        headers = {"User-Agent": self.limits.user_agent}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        seen, current = [url], url
        async with self._slots:
            while True:
                fetched = await self._one(url, current, headers)
                location = fetched.problem is None and 300 <= fetched.status < 400 and fetched.status != 304
                if not location:
                    return fetched
                target = normalize(urljoin(current, fetched.final_url))
                problem = self._redirect_problem(target, seen)
                if problem:
                    return Fetched(url, target, fetched.status, problem=problem)
                seen.append(target)
                current = target

    def _redirect_problem(self, target: str, seen: list[str]) -> str | None:
        if not self.scope.same_site(target):
            return f"redirects off the site (to {target})"
        if target in seen:
            return "redirect loop"
        if len(seen) > MAX_REDIRECTS:
            return f"more than {MAX_REDIRECTS} redirects"
        if not self.allowed(target):
            return "redirects to a page robots.txt disallows"
        return None

    async def _one(self, url: str, current: str, headers: dict[str, str]) -> Fetched:
        await self._pace()
        self.requests += 1
        try:
            async with self.client.stream("GET", current, headers=headers) as response:
                return await self._read(url, current, response)
        except httpx.HTTPError as exc:
            return Fetched(url, current, problem=f"unreachable ({type(exc).__name__})", unreachable=True)

    async def _read(self, url: str, current: str, response: httpx.Response) -> Fetched:
        fetched = Fetched(
            url,
            current,
            response.status_code,
            content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
        )
        if response.is_redirect:
            fetched.final_url = response.headers.get("location", "")
            return fetched
        if response.status_code >= 500 or response.status_code == 429:
            fetched.problem, fetched.unreachable = f"unreachable (HTTP {response.status_code})", True
            return fetched
        if response.status_code != 200:
            if response.status_code != 304:
                fetched.problem = f"HTTP {response.status_code}"
            return fetched
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > self.limits.max_page_bytes:
                self.bytes_read += len(body)
                fetched.problem = f"over the size limit ({self.limits.max_page_bytes:,} bytes)"
                return fetched
        self.bytes_read += len(body)
        fetched.body = bytes(body)
        return fetched


async def read_robots(fetcher: SiteFetcher) -> RobotFileParser:
    """The site's robots.txt rules (none: everything allowed). Unreachable robots.txt: the site is down."""
    fetched = await fetcher.get(f"{fetcher.scope.origin}/robots.txt")
    parser = RobotFileParser()
    if fetched.unreachable:
        raise SiteUnreachable(f"robots.txt: {fetched.problem}")
    parser.parse(fetched.body.decode("utf-8", "replace").splitlines() if fetched.ok else [])
    return parser


def _xml(body: bytes, limit: int) -> ET.Element | None:
    if body[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(body)) as unzipped:
                body = unzipped.read(limit + 1)
        except (OSError, EOFError):
            return None
        if len(body) > limit:
            return None
    try:
        return ET.fromstring(body)
    except ET.ParseError:
        return None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


@dataclass(slots=True)
class Discovery:
    """The pages a crawl will visit, with their sitemap ``lastmod`` (None: not given). ``complete``: every page of
    the site was listed (a sitemap read whole, no limit reached), so a page absent from it is gone."""

    pages: dict[str, str | None] = field(default_factory=dict)
    complete: bool = False
    from_sitemap: bool = False
    disallowed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


async def read_sitemaps(fetcher: SiteFetcher, start: str) -> Discovery:
    """Pages under the scope from robots.txt's sitemaps, else ``/sitemap.xml`` at the prefix and at the origin."""
    scope = fetcher.scope
    robots_maps = list(fetcher.robots.site_maps() or []) if fetcher.robots else []
    queue = [(u, 0) for u in robots_maps or [scope.root + "sitemap.xml", scope.origin + "/sitemap.xml"]]
    found = Discovery(complete=True)
    visited: set[str] = set()
    while queue and len(visited) < MAX_SITEMAPS:
        url, depth = queue.pop(0)
        if url in visited or not scope.same_site(url):
            continue
        visited.add(url)
        fetched = await fetcher.get(url)
        if fetched.unreachable:
            raise SiteUnreachable(f"sitemap {url}: {fetched.problem}")
        tree = _xml(fetched.body, fetcher.limits.max_page_bytes) if fetched.ok else None
        if tree is None:
            if fetched.ok:
                found.notes.append(f"sitemap {url} is not valid XML")
            continue
        if _local(tree.tag) == "sitemapindex" and depth < SITEMAP_DEPTH:
            queue.extend((loc.text.strip(), depth + 1) for loc in tree.iter() if _local(loc.tag) == "loc" and loc.text)
            continue
        _add_urls(tree, fetcher, found)
    found.from_sitemap = bool(found.pages)
    if not found.pages:
        return Discovery(pages={normalize(start): None}, notes=found.notes)
    return found


def _add_urls(tree: ET.Element, fetcher: SiteFetcher, found: Discovery) -> None:
    for entry in tree:
        if _local(entry.tag) != "url":
            continue
        values = {_local(child.tag): (child.text or "").strip() for child in entry}
        loc = values.get("loc")
        if not loc or not fetcher.scope.contains(loc):
            continue
        loc = normalize(loc)
        if not fetcher.allowed(loc):
            found.disallowed.append(loc)
        elif len(found.pages) < fetcher.limits.max_pages:
            found.pages[loc] = values.get("lastmod") or None
        elif found.complete:
            found.complete = False
            found.notes.append(f"the sitemaps list more pages than the limit (crawl_max_pages = {len(found.pages)})")
