"""The main text of a fetched web page, with its headings (for sections and anchors), its canonical URL and its links.

First the parts no generator puts the content in are removed (``nav``, ``footer``, forms, scripts, ARIA
navigation/banner/contentinfo, "edit this page" and permalink links; ``header`` and ``aside`` when they are around
the article, not in it), and the headings' ids are read for anchors. Then the main content is the page's own: the
one ``<article>``, else the one ``<main>`` (or ``role="main"``) that the documentation generators all mark it with.
Only a page that marks none is given to readability-lxml (the maintained Python port of Mozilla's Readability
heuristics), which scores the blocks and keeps the best. On a page that marks its content, Readability's pick is
worse than the mark: of a reference page whose tables sit in collapsed blocks it keeps the longest one (semaphore's
container registry page: 50 of its 306 table rows). Readability was chosen over trafilatura because it returns HTML,
so the headings and the blocks survive; trafilatura brings a larger tree of dependencies (date parsing, language
detection).

The main content, HTML, is converted to CommonMark (:mod:`anaphora.ingest.html_markdown`) and read by the Markdown
reader that reads a folder's pages, so a crawled page is cut into the same sections of typed blocks (paragraphs,
lists, code, tables) and chunked alike.

A page whose main text is empty, or a "please enable JavaScript" shell, is reported with the reason and never
indexed: its text would answer nothing and replace a good page on re-sync.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin

from anaphora.errors import ConfigurationError
from anaphora.ingest.html_markdown import html_to_markdown
from anaphora.ingest.markdown import markdown_sections
from anaphora.ingest.sections import Section
from anaphora.store.sources import Anchor

# A <header> inside the article or main content is the page's own (Docusaurus puts the title's <h1> there), an
# <aside> inside the article is part of it (docutils writes admonitions, sidebars and footnotes as <aside>): only
# the ones around the content are the site's.
_BOILERPLATE = (
    "//script | //style | //noscript | //template | //nav | //footer | //form | //iframe"
    " | //header[not(ancestor::article or ancestor::main or ancestor::*[@role='main'])]"
    " | //aside[not(ancestor::article)]"
    " | //*[@role='navigation' or @role='banner' or @role='contentinfo' or @role='search' or @aria-hidden='true']"
)
_PERMALINK_TEXT = {"", "¶", "#", "§", "🔗", "\u200b", "link", "permalink", "direct link to heading"}
_EDIT_LINK = re.compile(r"^\s*(edit|improve|suggest an edit to) this page\s*$", re.IGNORECASE)
JS_SHELL = re.compile(
    r"(enable|turn on|activate)\s+javascript|javascript\s+(is\s+)?(required|disabled|must be enabled)"
    r"|requires\s+javascript|needs\s+javascript",
    re.IGNORECASE,
)
MIN_WORDS = 5  # fewer words of main text: nothing to answer from
MARKED_SHARE = 0.5  # the least share of the page's text (boilerplate removed) its marked main content holds
SHELL_MAX_CHARS = 600  # a page this short that asks for JavaScript is a shell, whatever else it says
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


@dataclass(slots=True)
class ExtractedPage:
    """What a page gives the index: sections under heading paths, or ``problem`` (why it gives nothing)."""

    title: str = ""
    canonical: str | None = None
    sections: list[Section] = field(default_factory=list)
    anchors: tuple[Anchor, ...] = ()
    links: list[str] = field(default_factory=list)
    problem: str | None = None

    @property
    def text_hash(self) -> str:
        """A hash of the extracted text only: a new theme around unchanged text re-indexes nothing."""
        digest = hashlib.sha256()
        for section in self.sections:
            digest.update(f"{section.heading}\n{section.text}\n".encode())
        return digest.hexdigest()


def _readability():
    try:
        from readability import Document
    except ImportError as exc:  # the optional extra
        raise ConfigurationError(
            "ingesting a web site needs readability-lxml", hint="pip install 'anaphora[site]'"
        ) from exc
    return Document


def _text(element) -> str:
    return re.sub(r"\s+", " ", element.text_content()).strip()


def _heading_id(heading) -> str | None:
    """The id a link to this heading uses: its own, an anchor inside it, a permalink's target, or its section's."""
    if heading.get("id"):
        return heading.get("id")
    for anchor in heading.iter("a"):
        if anchor.get("id") or anchor.get("name"):
            return anchor.get("id") or anchor.get("name")
        href = anchor.get("href") or ""
        if href.startswith("#") and len(href) > 1:
            return href[1:]
    parent = heading.getparent()
    if parent is not None and parent.tag in ("section", "div") and parent.get("id"):
        first = next((c for c in parent if isinstance(c.tag, str) and c.tag in _HEADINGS), None)
        if first is heading:
            return parent.get("id")
    return None


def _clean(root) -> None:
    """Remove what is never content, and the permalink/edit links that would leak into heading texts."""
    for element in root.xpath(_BOILERPLATE):
        if element.getparent() is not None:
            element.drop_tree()
    for anchor in list(root.iter("a")):
        text = (anchor.text_content() or "").strip().lower()
        inside_heading = any(a.tag in _HEADINGS for a in anchor.iterancestors())
        if (inside_heading and text in _PERMALINK_TEXT) or _EDIT_LINK.match(text):
            anchor.drop_tree()


def _anchors(root) -> tuple[Anchor, ...]:
    found: list[Anchor] = []
    stack: list[tuple[int, str]] = []
    for heading in root.iter(*_HEADINGS):
        level, text = int(heading.tag[1]), _text(heading)
        stack = [(lvl, t) for lvl, t in stack if lvl < level]
        if (anchor_id := _heading_id(heading)) and text:
            found.append(Anchor(anchor_id, text, tuple(t for _, t in stack)))
        stack.append((level, text))
    return tuple(found)


def _canonical(root, url: str) -> str | None:
    for link in root.xpath("//link[@rel and @href]"):
        if "canonical" in link.get("rel", "").lower().split():
            return urldefrag(urljoin(url, link.get("href").strip()))[0]
    return None


def _marked_main(root):
    """The element the page marks as its main content: its one ``<article>``, else its one ``<main>`` (or
    ``role="main"``), holding at least half the page's remaining text. None when it marks none, several (a blog
    index, a page of cards), or one too small to be the content (a card beside it)."""
    bodies = root.xpath("//body")
    words = len(_text(bodies[0] if bodies else root).split())
    for query in ("//article", "//main | //*[@role='main']"):
        found = root.xpath(query)
        if len(found) == 1 and len(_text(found[0]).split()) >= max(MIN_WORDS, MARKED_SHARE * words):
            return found[0]
    return None


def _main_content(root, url: str) -> str:
    """The HTML of the page's main content: what the page marks as such, else Readability's pick."""
    import lxml.html

    marked = _marked_main(root)
    if marked is not None:
        return lxml.html.tostring(marked, encoding="unicode")
    cleaned = lxml.html.tostring(root, encoding="unicode")
    return _readability()(cleaned, url=url).summary(html_partial=True)


def extract_page(html: str, url: str) -> ExtractedPage:
    """Extract ``html`` fetched from ``url`` (the URL after redirects)."""
    import lxml.html

    try:
        root = lxml.html.document_fromstring(html)
    except (ValueError, lxml.etree.ParserError) as exc:
        return ExtractedPage(problem=f"not readable as HTML ({exc})")
    title = _text(root.find(".//title")) if root.find(".//title") is not None else ""
    canonical = _canonical(root, url)
    links = [urldefrag(urljoin(url, a.get("href")))[0] for a in root.xpath("//a[@href]")]
    robots = " ".join(m.get("content", "") for m in root.xpath("//meta[@name='robots']")).lower()
    bodies = root.xpath("//body")
    whole = _text(bodies[0]) if bodies else ""
    if "noindex" in robots:
        return ExtractedPage(title, canonical, links=links, problem="marked noindex (meta robots)")
    _clean(root)
    anchors = _anchors(root)
    for heading in root.iter(*_HEADINGS):  # Readability drops a heading whose id reads "tags", "media", "tool"...
        heading.attrib.pop("id", None)
        heading.attrib.pop("class", None)
    sections = markdown_sections(html_to_markdown(_main_content(root, url)))
    words = sum(len(s.text.split()) for s in sections)
    shown = " ".join(s.text for s in sections)
    page = ExtractedPage(title, canonical, sections, anchors, links)
    if JS_SHELL.search(whole) and len(shown) < SHELL_MAX_CHARS:
        page.problem = "a JavaScript shell (no text without running its scripts)"
    elif words < MIN_WORDS:
        page.problem = "no main text (empty page)"
    return page
