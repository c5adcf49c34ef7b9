"""A static documentation site for crawl tests, served on 127.0.0.1 by ``http.server``: a few pages of the traefik
dev corpus rendered to HTML (markdown-it) inside a template whose header, navigation and footer carry
:data:`MARKER`, a nested sitemap index with ``lastmod``, robots.txt with a disallowed path, a redirect, a 404, an
empty JavaScript shell, ETag / If-None-Match, and switches for a page that changes, one that disappears and an
outage. Every request is logged, so a test can count what a sync fetched."""

from __future__ import annotations

import hashlib
import html
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from anaphora.ingest.markdown import split_front_matter
from anaphora.testing.static_site import render_article

MARKER = "QZXV-TEMPLATE-MARKER"
PAGES = {  # path under /docs/ -> file of the traefik corpus
    "tracing/": "observe/tracing.md",
    "metrics/": "observe/metrics.md",
    "overview/": "observe/overview.md",
    "middlewares/basicauth/": "reference/routing-configuration/http/middlewares/basicauth.md",
    "middlewares/compress/": "reference/routing-configuration/http/middlewares/compress.md",
}
SHELL = (
    "<!doctype html><html><head><title>App</title><script src='/app.js'></script></head><body>"
    "<noscript>You need to enable JavaScript to run this app.</noscript><div id='root'></div></body></html>"
)
CHANGING_V1 = "# Release cadence\n\nTraefik ships a minor release every quarter and patches every two weeks.\n"
CHANGING_V2 = "# Release cadence\n\nTraefik ships a minor release every month and patches every week since v3.7.\n"
HOME = "# Traefik documentation\n\nStart with the overview, then set up tracing and metrics for your routers.\n"
VANISHING = "# Legacy dashboard\n\nThe legacy dashboard listened on port 8081 and was removed in version three.\n"


def render(markdown: str) -> tuple[str, str]:
    """(title, article HTML) of a Markdown page, headings given ids as MkDocs does (traefik's generator)."""
    metadata, _, _ = split_front_matter(markdown)
    article = render_article(markdown, "mkdocs")
    title = str(metadata.get("title") or "")
    if title and "<h1" not in article:
        article = f"<h1>{html.escape(title)}</h1>\n{article}"
    return title, article


def page(title: str, article: str, canonical: str | None = None) -> str:
    nav = "".join(f'<li><a href="/docs/{p}">{p}</a></li>' for p in PAGES)
    link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)} - Traefik</title>{link}</head>"
        f"<body><header><a href='/docs/'>Traefik Docs {MARKER} header</a><form><input name=q></form></header>"
        f"<nav><p>{MARKER} navigation</p><ul>{nav}<li><a href='/docs/private/keys/'>keys</a></li>"
        f"<li><a href='/outside/'>other product</a></li></ul></nav>"
        f"<main><article>{article}<a href='https://github.com/traefik/edit'>Edit this page</a></article></main>"
        f"<aside>{MARKER} table of contents</aside>"
        f"<footer><p>{MARKER} footer: Copyright Traefik Labs. Cookie settings. Privacy policy.</p></footer>"
        "</body></html>"
    )


@dataclass
class DocsSite:
    corpus: Path
    changed: bool = False  # the changing page has its second version (and a newer lastmod)
    vanished: bool = False  # the vanishing page answers 404 and has left the sitemap
    down: bool = False  # every request answers 503
    redesigned: bool = False  # the sitemap lists the changing page only; the content pages answer 404
    lastmod: bool = True  # the sitemap gives lastmod (without: a re-sync asks with If-None-Match)
    failing: set[str] = field(default_factory=set)  # paths that answer 503 (a partial outage)
    sitemap: bool = True  # without: robots.txt names none and the sitemaps answer 404 (links are followed)
    log: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.html = {}
        for path, file in PAGES.items():
            title, article = render((self.corpus / file).read_text(encoding="utf-8"))
            self.html[f"/docs/{path}"] = page(title or path, article)

    def requested(self, since: int = 0) -> list[str]:
        return [p for p, _ in self.log[since:]]

    def sitemaps(self, base: str) -> dict[str, str]:
        urls = [(f"/docs/{p}", "2026-11-01") for p in PAGES]
        urls += [
            ("/docs/old-tracing/", "2026-11-01"),  # redirects to /docs/tracing/
            ("/docs/missing/", "2026-11-01"),  # 404
            ("/docs/app/", "2026-11-01"),  # a JavaScript shell
            ("/docs/private/keys/", "2026-11-01"),  # disallowed by robots.txt
            ("/outside/", "2026-11-01"),  # outside the prefix
            ("/docs/changing/", "2026-12-01" if self.changed else "2026-11-01"),
            ("/docs/overview/index.html", "2026-11-01"),  # the overview again, its canonical URL names it
        ]
        extra = [] if self.vanished or self.redesigned else [("/docs/vanishing/", "2026-11-01")]
        if self.redesigned:
            urls = [u for u in urls if u[0] == "/docs/changing/"]
        entries = lambda items: "".join(  # noqa: E731
            f"<url><loc>{base}{path}</loc>{f'<lastmod>{mod}</lastmod>' if self.lastmod else ''}</url>"
            for path, mod in items
        )
        ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
        return {
            "/sitemap_index.xml": f"<?xml version='1.0'?><sitemapindex {ns}><sitemap><loc>{base}/sitemaps/pages.xml"
            f"</loc></sitemap><sitemap><loc>{base}/sitemaps/more_index.xml</loc></sitemap></sitemapindex>",
            "/sitemaps/more_index.xml": f"<?xml version='1.0'?><sitemapindex {ns}><sitemap><loc>{base}/sitemaps/"
            "extra.xml</loc></sitemap></sitemapindex>",
            "/sitemaps/pages.xml": f"<?xml version='1.0'?><urlset {ns}>{entries(urls)}</urlset>",
            "/sitemaps/extra.xml": f"<?xml version='1.0'?><urlset {ns}>{entries(extra)}</urlset>",
        }

    def respond(self, path: str, base: str) -> tuple[int, dict[str, str], str]:
        if self.down or path in self.failing:
            return 503, {}, "down for maintenance"
        if path == "/robots.txt":
            named = f"Sitemap: {base}/sitemap_index.xml\n" if self.sitemap else ""
            return 200, {"Content-Type": "text/plain"}, f"User-agent: *\nDisallow: /docs/private/\n\n{named}"
        if self.sitemap and path in (maps := self.sitemaps(base)):
            return 200, {"Content-Type": "application/xml"}, maps[path]
        if path == "/docs/old-tracing/":
            return 301, {"Location": "/docs/tracing/"}, ""
        if path == "/docs/app/":
            return 200, {"Content-Type": "text/html"}, SHELL
        if path == "/docs/changing/":
            return (
                200,
                {"Content-Type": "text/html"},
                page("Release cadence", render(CHANGING_V2 if self.changed else CHANGING_V1)[1]),
            )
        if path == "/docs/vanishing/" and not (self.vanished or self.redesigned):
            return 200, {"Content-Type": "text/html"}, page("Legacy dashboard", render(VANISHING)[1])
        if path == "/docs/overview/index.html" and not self.redesigned:
            canonical = f"{base}/docs/overview/"
            return (
                200,
                {"Content-Type": "text/html"},
                self.html["/docs/overview/"].replace("<title>", f'<link rel="canonical" href="{canonical}"><title>', 1),
            )
        if path == "/docs/":  # the home page: no sitemap lists it, a link crawl starts there
            return 200, {"Content-Type": "text/html"}, page("Traefik docs", render(HOME)[1])
        if path in self.html and not self.redesigned:
            return 200, {"Content-Type": "text/html; charset=utf-8"}, self.html[path]
        return 404, {"Content-Type": "text/html"}, page("Not found", "<h1>Not found</h1><p>No such page.</p>")


def handler_for(site: DocsSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://{self.headers['Host']}"
            status, headers, body = site.respond(self.path, base)
            data = body.encode()
            etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
            if status == 200 and self.headers.get("If-None-Match") == etag:
                status, data = 304, b""
            with site.lock:
                site.log.append((self.path, status))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if status in (200, 304):
                self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def server(site: DocsSite) -> ThreadingHTTPServer:
    return ThreadingHTTPServer(("127.0.0.1", 0), handler_for(site))
