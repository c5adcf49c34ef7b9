"""Every chunk of the five realdocs-dev trees, cited with a base URL, opens a page that a served copy of the site
answers with 200, at an anchor that page has.

The served copy is :mod:`anaphora.testing.static_site`'s: each page's Markdown (front matter removed, dialects
unwrapped, as ingest reads it) rendered by markdown-it to HTML, written where the generator writes it (``x/`` ->
``x/index.html``, ``x.html``, a clean ``x`` -> ``x.html``), each heading's ``id`` made from the *rendered* heading's
text by the generator's slug rule, and served by ``http.server`` on 127.0.0.1 with the usual static-host lookups.
Celery's reStructuredText pages are rendered by docutils' HTML writer with Sphinx's settings: the ids there are the
writer's, after docutils' transforms, against the ids ingest reads off the parse.

What this proves: the URL mapping is one-to-one over real trees (no two files on one URL, every URL lands on a
page), every heading path the ingest parse gives a chunk finds its heading (so no citation falls back to the page
top by accident), and ids computed from markdown-it tokens equal ids computed from the rendered HTML. What it does
not prove: that Hugo, MkDocs, Docusaurus or VitePress themselves render these ids. The slug rules are pinned to the
generators' documented outputs in test_urls.py, and explicit ``{#id}`` attributes (587 in semaphore-ce, 30 in mise)
are taken verbatim.

The trees are ../shared/bench/realdocs-dev (see its README for licences); elsewhere the test is skipped.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.parsers import parse_file
from anaphora.ingest.urls import PageLink, SiteRules, chunk_url, detect_generator, folder_page, page_path
from anaphora.testing.static_site import StaticHost, build_site
from tests.conftest import ROOT
from tests.local_http import serving

pytestmark = [pytest.mark.unit, pytest.mark.slow]

REALDOCS = next(
    (p for p in (b / "shared" / "bench" / "realdocs-dev" for b in (ROOT.parent, ROOT.parent.parent)) if p.is_dir()),
    None,
)
GENERATORS = {
    "loki": "hugo",
    "traefik": "mkdocs",
    "semaphore-ce": "docusaurus",
    "mise": "vitepress",
    "celery": "sphinx",
}
BASE = "http://docs.test/"


def pages_of(corpus: Path, generator: str) -> list[Path]:
    """The tree's pages: Markdown (not the corpus's SOURCE.md), or a Sphinx tree's ``.rst`` (its ``.txt`` files are
    included into pages, not published)."""
    pattern = "*.rst" if generator == "sphinx" else "*.md"
    return sorted(p for p in corpus.rglob(pattern) if p.name != "SOURCE.md")


def cited_urls(links: dict[Path, PageLink]) -> dict[str, set[str]]:
    """Every chunk's citation URL, by page (chunked as ingest chunks, no embedding)."""
    count = HashingEmbedder().count_tokens
    anchors: dict[str, set[str]] = defaultdict(set)
    for file, page in links.items():
        sections = parse_file(file).sections
        for piece in chunk_sections(sections, size=200, overlap=40, count=count):
            url = chunk_url(page, piece.heading)
            anchors[page.url].add(url.split("#", 1)[1] if "#" in url else "")
    return anchors


@pytest.mark.skipif(REALDOCS is None, reason="the realdocs-dev corpora are not beside the repository")
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_every_chunk_of_a_real_tree_opens_a_served_page_at_an_existing_anchor(name: str, tmp_path: Path) -> None:
    corpus = REALDOCS / name
    generator = detect_generator(corpus)
    assert generator == GENERATORS[name]
    rules = SiteRules(BASE, generator)
    links = {file: folder_page(corpus, file, rules) for file in pages_of(corpus, generator)}
    build_site(links, BASE, generator, tmp_path)  # refuses two files on one URL
    cited = cited_urls(links)
    headings = sum(len(a - {""}) for a in cited.values())
    assert headings > len(cited)  # most citations open a heading, not the page top
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(StaticHost, directory=str(tmp_path)))
    missing = []
    with serving(server) as local, httpx.Client(timeout=10) as http:
        for page, anchors in cited.items():
            response = http.get(local + "/" + page.removeprefix(BASE))
            assert response.status_code == 200, page
            missing += [f"{page}#{a}" for a in anchors if a and f'id="{a}"' not in response.text]
    assert not missing, f"{len(missing)} anchors not on their page, e.g. {missing[:5]}"


@pytest.mark.skipif(REALDOCS is None, reason="the realdocs-dev corpora are not beside the repository")
def test_celery_rst_pages_map_to_sphinx_html_one_to_one() -> None:
    corpus = REALDOCS / "celery"
    assert detect_generator(corpus) == "sphinx"
    rules = SiteRules(BASE, "sphinx")
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*.rst"))
    paths = [page_path(f, rules) for f in files]
    assert len(set(paths)) == len(files) > 200
    assert page_path("userguide/tasks.rst", rules) == "userguide/tasks.html"
    assert all(p.endswith(".html") and not p.startswith("/") for p in paths)
