"""A crawled page is read as its Markdown is: the main content the page marks (``<article>``, ``<main>``), converted
to CommonMark and cut by the Markdown reader into the same sections of typed blocks, so the crawl and the folder
ingest of the same docs chunk alike. Readability picks the content only on a page that marks none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anaphora.ingest.extract import extract_page
from anaphora.ingest.html_markdown import html_to_markdown
from anaphora.ingest.parsers import parse_file
from anaphora.ingest.urls import anchor_for
from anaphora.testing.static_site import TEMPLATE, render_article
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

EXAMPLES = sorted((ROOT / "examples" / "docs").glob("*.md"))
NAV = "<li><a href='/'>home</a></li><li><a href='/install/'>Install guide for every platform</a></li>"


def served(article: str, title: str = "Kestrel docs") -> str:
    return TEMPLATE.format(title=title, nav=NAV, article=article)


def shape(sections) -> list[tuple[str, str, list[str]]]:
    return [(s.heading, s.text, [b.kind for b in s.blocks]) for s in sections]


@pytest.mark.parametrize("page", EXAMPLES, ids=lambda p: p.name)
def test_a_served_page_gives_the_sections_and_blocks_of_its_markdown(page: Path) -> None:
    markdown = parse_file(page).sections
    crawled = extract_page(served(render_article(page.read_text(encoding="utf-8"), "plain")), "http://docs.test/x/")
    assert crawled.problem is None
    assert shape(crawled.sections) == shape(markdown)


def test_every_table_of_a_marked_reference_page_is_kept() -> None:
    """Readability keeps the one best-scored block of a page whose tables sit in collapsed blocks, one of them long
    (as semaphore's container registry page has them: 50 of its 306 rows were kept); the page's own <article> is
    all of it."""
    tables = "".join(
        f"<h2>Images for language {n}</h2><p>Pull them from the registry.</p><details><summary>Show me</summary>"
        "<div><table><thead><tr><th>Image</th><th>Link</th></tr></thead><tbody>"
        + "".join(f"<tr><td>lang{n}:{v}</td><td><code>registry.example/lang{n}:{v}</code></td></tr>" for v in rows)
        + "</tbody></table></div></details>"
        for n, rows in enumerate([range(6)] * 5 + [range(40)])
    )
    page = extract_page(served(f"<h1>Container registry</h1>{tables}"), "http://docs.test/registry/")
    kinds = [b.kind for s in page.sections for b in s.blocks]
    assert kinds.count("table") == 6
    text = "\n".join(s.text for s in page.sections)
    assert all(f"registry.example/lang{n}:5" in text for n in range(6))
    assert [s.heading for s in page.sections][-1] == "Container registry > Images for language 5"


def test_a_page_that_marks_no_main_content_is_read_by_readability_without_its_sidebar() -> None:
    sidebar = "".join(f"<li><a href='/p{n}'>Sidebar link number {n}</a></li>" for n in range(30))
    prose = " ".join(["The agent reads its token from the environment and retries every failed upload."] * 6)
    html = (
        "<html><head><title>Agents</title></head><body><div class='sidebar'><ul>"
        f"{sidebar}</ul></div><div class='content'><h1>Agents</h1><p>{prose}</p><h2>Tokens</h2><p>{prose}</p>"
        "</div></body></html>"
    )
    page = extract_page(html, "http://docs.test/agents/")
    text = "\n".join(s.text for s in page.sections)
    assert "retries every failed upload" in text
    assert "Sidebar link" not in text
    assert [s.heading for s in page.sections] == ["Agents", "Agents > Tokens"]


def test_the_conversion_keeps_what_the_markdown_reader_would_drop_or_split() -> None:
    html = (
        "<p>Replace &lt;placeholder&gt; with your host, then run step 1. again.</p>"
        "<table><thead><tr><th>Flag</th><th>Meaning</th></tr></thead><tbody>"
        "<tr><td><code>a|b</code></td><td>either</td></tr></tbody></table>"
        "<div class='highlight-yaml notranslate'><div class='highlight'><pre>key: 1<br>other: 2</pre></div></div>"
    )
    [section] = extract_page(served(f"<h1>Syntax</h1>{html}"), "http://docs.test/s/").sections
    paragraph, table, code = section.blocks
    assert paragraph.text == "Replace <placeholder> with your host, then run step 1. again."
    assert table.kind == "table" and table.parts == (r"| `a\|b` | either |",)
    assert code.kind == "code" and code.head == "```yaml" and code.parts == ("key: 1", "other: 2")
    assert html_to_markdown("<h2>Install <code>kestrel</code></h2>").strip() == "## Install `kestrel`"


def test_a_code_block_that_shows_a_fenced_block_stays_one_block() -> None:
    shown = "## Publish\n```sh\nmise run release\n```"
    html = (
        f"<h1>Plugins</h1><pre><code class='language-markdown'>{shown}\n</code></pre><h2>Distribution</h2><p>Git.</p>"
    )
    first, second = extract_page(served(html), "http://docs.test/p/").sections
    [code] = first.blocks
    assert code.kind == "code" and code.head == "```markdown" and code.parts == tuple(shown.split("\n"))
    assert second.heading == "Plugins > Distribution"


def test_a_crawled_sections_heading_path_finds_its_headings_id() -> None:
    """The heading ids are read off the page before its content is converted: a chunk's heading path (as the
    Markdown reader gives it, code in backticks) finds its heading's id, an explicit ``{#id}`` included."""
    text = (
        "# Install\n\nInstall the server on one machine.\n\n## Step 1 - Define the domain {#domain}\n\n"
        "Use a subdomain such as ci.example.com.\n\n## Run `semaphore start`\n\nStart the services.\n"
    )
    page = extract_page(served(render_article(text, "docusaurus")), "http://docs.test/install/")
    assert [s.heading for s in page.sections] == [
        "Install",
        "Install > Step 1 - Define the domain",
        "Install > Run `semaphore start`",
    ]
    assert [anchor_for(s.heading, page.anchors, page.title) for s in page.sections] == [
        "install",
        "domain",
        "run-semaphore-start",
    ]


def test_a_small_marked_article_beside_the_content_is_not_taken_for_it() -> None:
    prose = " ".join(["Rotate the token every ninety days and store it in the vault, never in the repository."] * 8)
    html = (
        "<html><head><title>Tokens</title></head><body><div class='content'><h1>Tokens</h1>"
        f"<p>{prose}</p><h2>Rotation</h2><p>{prose}</p></div>"
        "<article class='card'><h3>Related</h3><p>Read about agents and their many options here.</p></article>"
        "</body></html>"
    )
    page = extract_page(html, "http://docs.test/tokens/")
    assert [s.heading for s in page.sections][:2] == ["Tokens", "Tokens > Rotation"]
    assert "ninety days" in page.sections[0].text


def test_without_the_site_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from anaphora.errors import MissingDependencyError
    from anaphora.ingest import html_markdown

    monkeypatch.setitem(sys.modules, "markdownify", None)  # an import of it raises ImportError
    html_markdown._converter.cache_clear()
    try:
        with pytest.raises(MissingDependencyError) as caught:
            html_to_markdown("<p>text</p>")
    finally:
        html_markdown._converter.cache_clear()
    assert caught.value.extra == "site" and "anaphora[site]" in (caught.value.hint or "")


def test_a_header_or_aside_inside_the_article_is_content_and_around_it_is_not() -> None:
    """Docusaurus puts a page's <h1> in a <header> inside the article; docutils writes a note as an <aside>."""
    article = (
        "<header><h1>First steps</h1></header><p>Install the broker before the worker starts.</p>"
        "<aside class='admonition note'><p>Celery 5.5 supports Django 2.2 LTS or newer.</p></aside>"
        "<h2>Running</h2><p>Start the worker with the app module and a concurrency of four.</p>"
    )
    html = (
        "<html><body><header><a href='/'>SITE-HEADER docs home</a></header><main><article>"
        f"{article}</article><aside>SITE-TOC on this page</aside></main></body></html>"
    )
    page = extract_page(html, "http://docs.test/first/")
    assert [s.heading for s in page.sections] == ["First steps", "First steps > Running"]
    text = "\n".join(s.text for s in page.sections)
    assert "supports Django 2.2" in text
    assert "SITE-" not in text


def test_docutils_code_blocks_keep_their_language() -> None:
    html = "<h1>Calling</h1><p>Call it so:</p><pre class='code python literal-block'>add.delay(2, 2)</pre>"
    [section] = extract_page(served(html), "http://docs.test/c/").sections
    assert section.blocks[-1].head == "```python"
