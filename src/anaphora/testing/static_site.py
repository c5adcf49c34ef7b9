"""A static copy of a documentation folder as its generator would publish it, for tests and benchmarks of published
URLs and site crawls: each Markdown page rendered by markdown-it (front matter removed, dialects unwrapped, as
ingest reads them), each reStructuredText page by docutils' HTML writer with Sphinx's settings, into a page template
with navigation and a footer, written where the generator writes it, plus a ``sitemap.xml``. A Markdown heading gets
the id the generator's slug rule gives its *rendered* text; an RST section the id docutils' writer gives it.

It is not the generator: the Markdown ids follow :mod:`anaphora.ingest.urls`' rules, computed here from the HTML
rather than from the Markdown tokens, and the RST pages are docutils' (Sphinx adds its theme and its own directives
around the same section ids). :class:`StaticHost` serves it with a static host's lookups.
"""

from __future__ import annotations

import html
import re
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from anaphora.ingest.dialects import HEADING_ATTRIBUTES, unwrap
from anaphora.ingest.markdown import split_front_matter
from anaphora.ingest.urls import HeadingIds, PageLink, explicit_id

_TAG = re.compile(r"<[^>]+>")
_LITERAL = re.compile(r'<span class="docutils literal">(.*?)</span>', re.DOTALL)  # Sphinx writes these as <code>
TEMPLATE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
    "<header><a href='/'>Docs home</a></header><nav><ul>{nav}</ul></nav>"
    "<main><article>{article}</article></main><footer><p>Copyright. Privacy policy.</p></footer></body></html>"
)


def output_file(path: str) -> str:
    """Where a static build writes the page served at ``path``."""
    if path == "" or path.endswith("/"):
        return path + "index.html"
    return path if path.endswith(".html") else path + ".html"


def render_article(text: str, generator: str) -> str:
    """The page's Markdown as HTML, each heading with the id its rendered text gets from the generator's rule."""
    from markdown_it import MarkdownIt

    _, body, _ = split_front_matter(text)
    parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    tokens = parser.parse(unwrap(body))
    ids = HeadingIds(generator)
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            children = tokens[index + 1].children or []
            inner = parser.renderer.renderInline(children, parser.options, {})
            label, explicit = explicit_id(html.unescape(_TAG.sub("", inner)).strip())
            token.attrSet("id", ids(label.strip(), explicit))
            if children and children[-1].type == "text":  # the generators show the heading without its {#id}
                children[-1].content = HEADING_ATTRIBUTES.sub("", children[-1].content)
    return parser.renderer.render(tokens, parser.options, {})


def render_rst_article(text: str, name: str = "page.rst") -> str:
    """A reStructuredText page as docutils' HTML5 writer renders it with the settings Sphinx gives docutils (the
    page title kept as a section, ids ``id1``, ``id2`` for a repeated title), Sphinx's directives and roles read as
    ingest reads them, inline literals as ``<code>`` (as Sphinx's writer has them)."""
    import io

    from docutils.core import publish_parts

    from anaphora.ingest.rst import LINE_LIMIT
    from anaphora.ingest.sphinx import sphinx_namespace

    overrides = {
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": io.StringIO(),
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "syntax_highlight": "none",
        "line_length_limit": LINE_LIMIT,
        "auto_id_prefix": "id",
        "doctitle_xform": False,
        "sectsubtitle_xform": False,
    }
    with sphinx_namespace(text):
        parts = publish_parts(text, source_path=name, writer="html5", settings_overrides=overrides)
    return _LITERAL.sub(r'<code class="docutils literal notranslate">\1</code>', parts["body"])


def build_site(links: dict[Path, PageLink], base_url: str, generator: str, out: Path) -> dict[str, Path]:
    """Write each file's page under ``out`` and a sitemap; returns the URL path of each page. Refuses two files
    published at one URL."""
    seen: dict[str, Path] = {}
    for file, link in links.items():
        path = link.url.removeprefix(base_url)
        if path in seen:
            raise ValueError(f"{file} and {seen[path]} are both published at {link.url}")
        seen[path] = file
    nav = "".join(f"<li><a href='/{html.escape(p)}'>{html.escape(p or 'home')}</a></li>" for p in list(seen)[:30])
    for path, file in seen.items():
        text = file.read_text(encoding="utf-8-sig", errors="replace")
        rst = file.suffix.lower() == ".rst"
        article = render_rst_article(text, file.name) if rst else render_article(text, generator)
        title = html.escape(links[file].title or path)
        target = out / output_file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(TEMPLATE.format(title=title, nav=nav, article=article), encoding="utf-8")
    entries = "".join(f"<url><loc>{html.escape(base_url + p)}</loc></url>" for p in seen)
    sitemap = f"<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{entries}</urlset>"
    (out / "sitemap.xml").write_text(sitemap, encoding="utf-8")
    return seen


class StaticHost(SimpleHTTPRequestHandler):
    """A static host's lookups: ``/x/`` -> ``x/index.html``, a clean ``/x`` -> ``x.html`` (also beside a folder
    named ``x``). Give it ``directory`` with :func:`functools.partial`."""

    def translate_path(self, path: str) -> str:
        local = Path(super().translate_path(path))
        if not path.split("?", 1)[0].endswith("/") and Path(f"{local}.html").is_file():
            return f"{local}.html"
        return str(local)

    def log_message(self, *args: object) -> None:
        pass
