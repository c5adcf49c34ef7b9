"""Published URLs of a documentation folder: where each file is served and which id each heading gets, by the rules
of the site generator that builds it.

A citation that names ``install/kubernetes.md`` helps nobody reading the site; one that opens
``https://docs.example.com/install/kubernetes/#installing-with-helm`` does. The generator is read from what the tree
holds (its config file, else its conventions: Hugo's ``_index.md``, Sphinx's ``.rst``, MkDocs' ``!!!`` admonitions,
Docusaurus' ``:::note`` and ``sidebar_position``, VitePress' ``::: tip``) and can be named instead.

Page paths: front matter ``permalink`` / ``url`` (from the site root) and ``slug`` win; then the generator's rule
(Docusaurus drops numbered prefixes and serves ``index``/``README`` as the folder; MkDocs ``use_directory_urls``;
Hugo serves ``_index.md`` as its section; GitBook ``README.md`` as the folder; Sphinx ``.html``; VitePress ``.html``
unless clean URLs). ``aliases`` are old addresses that redirect to the page, so they never name it.

Anchors: an explicit ``{#id}`` first, else the generator's slug of the heading's text (github-slugger for
Docusaurus, GitBook, Hugo and plain trees; Python-Markdown's ``toc`` slugify for MkDocs; VitePress' own; docutils'
``make_id`` for Sphinx), with the generator's suffix for a repeated id (``-1`` or ``_1``). A reStructuredText
page's anchors are the ids docutils gives its sections as it parses them, which Sphinx publishes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import quote

from anaphora.errors import InputError
from anaphora.store.sources import Anchor

Generator = Literal["plain", "docusaurus", "mkdocs", "hugo", "gitbook", "sphinx", "vitepress"]
GENERATORS: tuple[str, ...] = ("plain", "docusaurus", "mkdocs", "hugo", "gitbook", "sphinx", "vitepress")

# config files that name the generator, looked for in the folder and up to three folders above it
_CONFIG_FILES: tuple[tuple[str, str], ...] = (
    ("docusaurus.config.js", "docusaurus"),
    ("docusaurus.config.ts", "docusaurus"),
    ("docusaurus.config.mjs", "docusaurus"),
    ("mkdocs.yml", "mkdocs"),
    ("mkdocs.yaml", "mkdocs"),
    (".vitepress", "vitepress"),
    ("hugo.toml", "hugo"),
    ("hugo.yaml", "hugo"),
    ("conf.py", "sphinx"),
    (".gitbook.yaml", "gitbook"),
    ("SUMMARY.md", "gitbook"),
    ("book.json", "gitbook"),
)
# conventions in the Markdown itself, for a docs folder copied out of its repository (no config file beside it)
_MARKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("mkdocs", re.compile(r"^(?:!!!|\?\?\?\+?) ?\w+", re.MULTILINE)),
    ("vitepress", re.compile(r"^:::+ ?(?:tip|warning|info|danger|details|code-group)\b", re.MULTILINE)),
    ("docusaurus", re.compile(r"^(?::::+(?:note|info|tip|warning|danger|caution)\b|sidebar_position:)", re.MULTILINE)),
    ("hugo", re.compile(r"\{\{[<%]")),
)
_EXPLICIT_ID = re.compile(r"\s*\{:?\s*#([\w.:-]+)[^}]*\}\s*$")
_NUMBER_PREFIX = re.compile(r"^\d+[-_.]")
# the file names each generator serves as their folder's page (MkDocs: README when there is no index.md)
_INDEX_NAMES = {
    "docusaurus": {"index", "readme"},
    "mkdocs": {"index", "readme"},
    "hugo": {"_index", "index"},
    "gitbook": {"readme", "index"},
    "vitepress": {"index"},
}


@dataclass(frozen=True, slots=True)
class SiteRules:
    """How a folder is published: the site's ``base_url`` (the URL the folder's root is served at), the generator,
    and ``directory_urls`` (MkDocs ``use_directory_urls``, VitePress clean URLs; None: the generator's default)."""

    base_url: str
    generator: str = "plain"
    directory_urls: bool | None = None

    def __post_init__(self) -> None:
        check_base_url(self.base_url)
        if self.generator not in GENERATORS:
            raise InputError(f"unknown site generator {self.generator!r}", hint=f"use one of: {', '.join(GENERATORS)}")


def check_base_url(url: str) -> None:
    if not re.match(r"^https?://[^/\s]+", url or ""):
        raise InputError(
            f"base URL {url!r} is not an http(s) URL",
            hint="give the published site's address, e.g. https://docs.example.com/",
        )


def detect_generator(root: Path, *, sample: int = 60) -> str:
    """The generator that builds ``root``: a config file in it or up to three folders above, else the conventions
    most of a sample of its pages follow, else ``plain`` (the file's path is its URL)."""
    for folder in [root, *list(root.parents)[:3]]:
        for name, generator in _CONFIG_FILES:
            if (folder / name).exists():
                return generator
    if any(root.rglob("*.rst")):
        return "sphinx"
    if any(root.rglob("_index.md")):
        return "hugo"
    votes = dict.fromkeys((g for g, _ in _MARKS), 0)
    for file in sorted(root.rglob("*.md"))[:sample]:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for generator, pattern in _MARKS:
            votes[generator] += bool(pattern.search(text))
    best = max(votes, key=votes.__getitem__)
    return best if votes[best] else "plain"


def page_path(source: str, rules: SiteRules, metadata: dict[str, Any] | None = None) -> str:
    """The URL path of the file ``source`` (relative to the folder), relative to ``rules.base_url``."""
    front = metadata or {}
    for key in ("permalink", "url"):
        if isinstance(front.get(key), str) and front[key].strip():
            return front[key].strip().lstrip("/")
    path = PurePosixPath(source)
    parts, stem, suffix = list(path.parent.parts), path.stem, path.suffix.lower()
    generator = rules.generator
    if generator == "plain":
        return source
    if generator == "docusaurus":
        parts = [_NUMBER_PREFIX.sub("", p) for p in parts]
        stem = _NUMBER_PREFIX.sub("", stem)
    slug = front.get("slug")
    if isinstance(slug, str) and slug.strip():
        if slug.startswith("/"):
            return slug.strip().lstrip("/")
        stem = slug.strip()
    index = stem.lower() in _INDEX_NAMES.get(generator, {"index"})
    if generator == "docusaurus" and parts and stem == parts[-1]:
        index = True  # a doc named like its folder is the folder's index
    if generator == "sphinx":
        return "/".join([*parts, f"{stem}.html"])
    if generator == "hugo":
        parts, stem = [p.lower().replace(" ", "-") for p in parts], stem.lower().replace(" ", "-")
    folder = "/".join(parts) + "/" if parts else ""
    if index:
        return folder
    return folder + _leaf(stem, generator, rules.directory_urls, suffix)


def _leaf(stem: str, generator: str, directory_urls: bool | None, suffix: str) -> str:
    if generator in ("mkdocs", "hugo"):
        return f"{stem}/" if directory_urls is not False else f"{stem}.html"
    if generator == "vitepress":
        return stem if directory_urls else f"{stem}.html"
    return stem  # docusaurus, gitbook: no extension, no trailing slash


def join_url(base_url: str, path: str) -> str:
    """``base_url`` (made to end in /) with ``path`` appended, percent-encoded where a URL needs it."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    return base + quote(path, safe="/:@!$&'()*+,;=-._~%")


# -- anchors ----------------------------------------------------------------------------------------------------
def github_slug(text: str) -> str:
    """github-slugger (Docusaurus, GitBook, Hugo's ``github`` heading ids): lowercase, punctuation dropped, each
    space a hyphen."""
    kept = "".join(c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def mkdocs_slug(text: str) -> str:
    """Python-Markdown ``toc``'s ``slugify`` (MkDocs' default): ASCII only, runs of spaces and hyphens one hyphen."""
    value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


_VITEPRESS_SPECIAL = re.compile(r"[\s~`!@#$%^&*()\-_+=\[\]{}|\\;:\"'“”‘’<>,.?/]+")


def vitepress_slug(text: str) -> str:
    """VitePress' ``slugify`` (``@mdit-vue/shared``): accents removed, runs of punctuation one hyphen, a leading
    digit prefixed with ``_``."""
    value = unicodedata.normalize("NFKD", text)
    value = re.sub("[\u0300-\u036f]", "", value)
    value = re.sub(r"[\u0000-\u001f]", "", value)
    value = _VITEPRESS_SPECIAL.sub("-", value)
    value = re.sub(r"-{2,}", "-", value).strip("-")
    value = re.sub(r"^(\d)", r"_\1", value)
    return value.lower()


def sphinx_slug(text: str) -> str:
    """docutils' ``make_id``: ASCII, lowercase, runs of other characters one hyphen, starting with a letter."""
    value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    value = re.sub(r"[^a-z0-9]+", "-", value).strip("-")
    return re.sub(r"^[^a-z]+", "", value)


SLUGS = {
    "plain": github_slug,
    "docusaurus": github_slug,
    "gitbook": github_slug,
    "hugo": github_slug,
    "mkdocs": mkdocs_slug,
    "vitepress": vitepress_slug,
    "sphinx": sphinx_slug,
}


def explicit_id(heading: str) -> tuple[str, str | None]:
    """(the heading without its ``{#id}`` attribute, the id or None)."""
    match = _EXPLICIT_ID.search(heading)
    if match is None:
        return heading, None
    return heading[: match.start()].rstrip(), match.group(1)


class HeadingIds:
    """Gives each heading of one page its id in order, as the generator does (a repeated id gets a suffix)."""

    def __init__(self, generator: str) -> None:
        self.slug = SLUGS.get(generator, github_slug)
        self.separator = "_" if generator == "mkdocs" else "-"
        self.seen: dict[str, int] = {}

    def __call__(self, text: str, explicit: str | None = None) -> str:
        base = explicit or self.slug(text) or ("section" if self.separator == "-" else "_")
        if explicit:
            self.seen.setdefault(base, 0)
            return base
        if base not in self.seen:
            self.seen[base] = 0
            return base
        while True:
            self.seen[base] += 1
            candidate = f"{base}{self.separator}{self.seen[base]}"
            if candidate not in self.seen:
                self.seen[candidate] = 0
                return candidate


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def anchor_for(heading_path: str, anchors: Sequence[Anchor], title: str = "") -> str | None:
    """The id of the heading a chunk's heading path (``"Page > Section > Sub"``) ends in, or None for the top of
    the page (the path ends in the page's title, or no heading of the page has that text). Of headings with the
    same text, the one whose parents the path names most."""
    parts = [p for p in heading_path.split(" > ") if p.strip()]
    if not parts:
        return None
    last = _norm(parts[-1])
    if len(parts) == 1 and title and _norm(title) == last:
        return None
    named = {_norm(p) for p in parts[:-1]}
    best: tuple[int, str] | None = None
    for anchor in anchors:
        if _norm(anchor.text) != last:
            continue
        score = sum(_norm(p) in named for p in anchor.parents)
        if best is None or score > best[0]:
            best = (score, anchor.id)
    return best[1] if best else None


# -- a folder's pages ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PageLink:
    """Where one file is published: its URL (no anchor), the page title and the ids of its headings."""

    url: str
    title: str = ""
    anchors: tuple[Anchor, ...] = ()


def _slug_text(children: Sequence) -> str:
    """A heading's text as the browser shows it (what the generators slug): text and code, no HTML tags."""
    return "".join(t.content for t in children if t.type in ("text", "code_inline")).strip()


@cache
def _headings_parser():
    """The blocks of a page without their inline parse (half the time of a full parse): only headings are read."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).disable(["inline", "text_join"])


def markdown_anchors(text: str, generator: str) -> tuple[str, dict[str, Any], tuple[Anchor, ...]]:
    """(title, front matter, the page's headings with their ids) of a Markdown page, as ``generator`` renders it.
    Heading texts are those :mod:`anaphora.ingest.markdown` gives the chunks' heading paths, so they match."""
    from anaphora.ingest.dialects import HEADING_ATTRIBUTES, unwrap
    from anaphora.ingest.markdown import _parser, render_inline, split_front_matter

    metadata, body, _ = split_front_matter(text)
    title = str(metadata.get("title") or "").strip()
    ids = HeadingIds(generator)
    anchors: list[Anchor] = []
    stack: list[tuple[int, str]] = []
    tokens = _headings_parser().parse(unwrap(body))
    for index, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        children = _parser().parseInline(tokens[index + 1].content)[0].children or []
        shown = HEADING_ATTRIBUTES.sub("", render_inline(children)).strip()
        _, explicit = explicit_id(tokens[index + 1].content)
        level = int(token.tag[1])
        anchor_id = ids(explicit_id(_slug_text(children))[0], explicit)
        stack = [(lvl, h) for lvl, h in stack if lvl < level]
        anchors.append(Anchor(anchor_id, shown, tuple(h for _, h in stack)))
        stack.append((level, shown))
        if level == 1 and not title:
            title = shown
    return title, metadata, tuple(anchors)


def folder_page(root: Path, file: Path, rules: SiteRules) -> PageLink:
    """The published URL and heading ids of ``file`` in the folder ``root``: Markdown's headings by the generator's
    slug rule, reStructuredText's sections by docutils' ids (what Sphinx writes). Other files (HTML, text) get their
    page URL only: a citation opens the top of the page."""
    source = file.relative_to(root).as_posix()
    suffix = file.suffix.lower()
    if suffix not in (".md", ".markdown", ".mdx", ".rst"):
        return PageLink(join_url(rules.base_url, page_path(source, rules)))
    try:
        text = file.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return PageLink(join_url(rules.base_url, page_path(source, rules)))
    if suffix == ".rst":
        from anaphora.ingest.rst import rst_anchors

        try:
            title, anchors = rst_anchors(text, file.name)
        except InputError:  # a page ingest refuses too (a line too long to parse)
            title, anchors = "", ()
        return PageLink(join_url(rules.base_url, page_path(source, rules)), title, anchors)
    title, metadata, anchors = markdown_anchors(text, rules.generator)
    return PageLink(join_url(rules.base_url, page_path(source, rules, metadata)), title, anchors)


def chunk_url(page: PageLink, heading_path: str) -> str:
    """The URL a citation of a chunk under ``heading_path`` opens: the page, at the heading when it has one."""
    anchor = anchor_for(heading_path, page.anchors, page.title)
    return f"{page.url}#{anchor}" if anchor else page.url
