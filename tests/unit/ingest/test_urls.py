"""Published URLs of a folder's pages and the ids of their headings, generator by generator. The slug examples are
the generators' own documented outputs (github-slugger's README and tests, Python-Markdown's toc docs, VitePress'
slugify, docutils' make_id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora.errors import InputError
from anaphora.ingest.urls import (
    HeadingIds,
    SiteRules,
    anchor_for,
    chunk_url,
    detect_generator,
    folder_page,
    github_slug,
    markdown_anchors,
    mkdocs_slug,
    page_path,
    sphinx_slug,
    vitepress_slug,
)
from anaphora.store.sources import Anchor

pytestmark = pytest.mark.unit
BASE = "https://docs.example.com/"


@pytest.mark.parametrize(
    ("slug", "text", "expected"),
    [
        (github_slug, "Hello World", "hello-world"),
        (github_slug, "foo & bar", "foo--bar"),
        (github_slug, "-j --jobs <JOBS>", "-j---jobs-jobs"),
        (github_slug, "Ünïcode café", "ünïcode-café"),
        (github_slug, "v3.7: what's new?", "v37-whats-new"),
        (mkdocs_slug, "Foo & Bar", "foo-bar"),
        (mkdocs_slug, "Ünïcode", "unicode"),
        (mkdocs_slug, "HTTP Challenge (ACME)", "http-challenge-acme"),
        (vitepress_slug, "Activate mise", "activate-mise"),
        (vitepress_slug, "3. Activate mise", "_3-activate-mise"),
        (vitepress_slug, "What's new?", "what-s-new"),
        (sphinx_slug, "Getting Started", "getting-started"),
        (sphinx_slug, "1. Introduction", "introduction"),
    ],
)
def test_each_generator_slugs_a_heading_as_it_does(slug, text: str, expected: str) -> None:
    assert slug(text) == expected


def test_a_repeated_heading_gets_the_generators_suffix_and_an_explicit_id_wins() -> None:
    github, mkdocs = HeadingIds("docusaurus"), HeadingIds("mkdocs")
    assert [github("Example"), github("Example"), github("Example")] == ["example", "example-1", "example-2"]
    assert [mkdocs("Example"), mkdocs("Example")] == ["example", "example_1"]
    assert HeadingIds("docusaurus")("Step 1 - Define the domain", "domain") == "domain"


@pytest.mark.parametrize(
    ("generator", "source", "front", "expected"),
    [
        ("docusaurus", "01-getting-started/02-install.md", {}, "getting-started/install"),
        ("docusaurus", "guides/index.md", {}, "guides/"),
        ("docusaurus", "guides/README.md", {}, "guides/"),
        ("docusaurus", "guides/guides.md", {}, "guides/"),
        ("docusaurus", "guides/old.md", {"slug": "renamed"}, "guides/renamed"),
        ("docusaurus", "guides/old.md", {"slug": "/elsewhere/page"}, "elsewhere/page"),
        ("mkdocs", "setup/install.md", {}, "setup/install/"),
        ("mkdocs", "setup/index.md", {}, "setup/"),
        ("mkdocs", "setup/README.md", {}, "setup/"),
        ("hugo", "Setup/_index.md", {}, "setup/"),
        ("hugo", "setup/Install Guide.md", {}, "setup/install-guide/"),
        ("hugo", "setup/install.md", {"url": "/docs/install-now/"}, "docs/install-now/"),
        ("hugo", "setup/install.md", {"aliases": ["/old/"]}, "setup/install/"),
        ("gitbook", "setup/README.md", {}, "setup/"),
        ("gitbook", "setup/install.md", {}, "setup/install"),
        ("sphinx", "userguide/tasks.rst", {}, "userguide/tasks.html"),
        ("sphinx", "index.rst", {}, "index.html"),
        ("vitepress", "dev-tools/backends.md", {}, "dev-tools/backends.html"),
        ("vitepress", "index.md", {}, ""),
        ("vitepress", "guide/x.md", {"permalink": "/custom/x/"}, "custom/x/"),
        ("plain", "a/b.md", {}, "a/b.md"),
    ],
)
def test_each_generator_serves_a_file_where_it_does(generator, source, front, expected) -> None:
    assert page_path(source, SiteRules(BASE, generator), front) == expected


def test_directory_urls_can_be_turned_either_way() -> None:
    assert page_path("a/b.md", SiteRules(BASE, "mkdocs", directory_urls=False)) == "a/b.html"
    assert page_path("a/b.md", SiteRules(BASE, "vitepress", directory_urls=True)) == "a/b"


def test_bad_rules_are_refused_with_a_fix() -> None:
    with pytest.raises(InputError, match="not an http"):
        SiteRules("docs.example.com", "mkdocs")
    with pytest.raises(InputError, match="unknown site generator"):
        SiteRules(BASE, "jekyll-ish")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"mkdocs.yml": "site_name: x", "docs/a.md": "# A"}, "mkdocs"),
        ({"docs/_index.md": "# Home", "docs/a.md": "# A"}, "hugo"),
        ({"docs/a.rst": "A\n=\n"}, "sphinx"),
        ({"docs/a.md": "# A\n\n::: tip\nhi\n:::\n"}, "vitepress"),
        ({"docs/a.md": "---\nsidebar_position: 2\n---\n# A\n\n:::note\nhi\n:::\n"}, "docusaurus"),
        ({"docs/a.md": "# A\n\n!!! note\n    hi\n"}, "mkdocs"),
        ({"docs/a.md": "# A\n\ntext\n"}, "plain"),
    ],
)
def test_the_generator_is_read_from_the_tree(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert detect_generator(tmp_path / "docs") == expected


PAGE = """---
title: Installing Kestrel
---
Intro text.

## Installing with Helm {#helm}

### Example

## Upgrading

### Example
"""


def test_a_chunks_heading_path_opens_its_heading_and_the_intro_opens_the_page(tmp_path: Path) -> None:
    title, _, anchors = markdown_anchors(PAGE, "docusaurus")
    assert title == "Installing Kestrel"
    assert [a.id for a in anchors] == ["helm", "example", "upgrading", "example-1"]
    assert anchor_for("Installing Kestrel > Upgrading > Example", anchors, title) == "example-1"
    assert anchor_for("Installing Kestrel > Installing with Helm > Example", anchors, title) == "example"
    assert anchor_for("Installing Kestrel", anchors, title) is None
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / "kubernetes.md").write_text(PAGE)
    page = folder_page(tmp_path, tmp_path / "install" / "kubernetes.md", SiteRules(BASE, "mkdocs"))
    assert page.url == "https://docs.example.com/install/kubernetes/"
    assert chunk_url(page, "Installing Kestrel > Installing with Helm") == page.url + "#helm"


def test_an_unknown_heading_opens_the_top_of_the_page() -> None:
    assert anchor_for("Page > Nowhere", [Anchor("x", "Somewhere")], "Page") is None


RST_PAGE = """Tasks
=====

Tasks are the building blocks.

Basics
------

A task is a class with a ``run`` method.

.. _task-options:

Options of a :class:`~celery.Task`
----------------------------------

Set ``max_retries``.

Retrying
--------

Call ``retry``.

Basics
~~~~~~

Retry with a countdown.
"""


def test_an_rst_page_links_each_section_at_the_id_sphinx_publishes(tmp_path: Path) -> None:
    from anaphora.ingest.parsers import parse_file
    from anaphora.testing.static_site import render_rst_article

    page = tmp_path / "userguide" / "tasks.rst"
    page.parent.mkdir()
    page.write_text(RST_PAGE, encoding="utf-8")
    link = folder_page(tmp_path, page, SiteRules(BASE, "sphinx"))
    assert link.url == BASE + "userguide/tasks.html" and link.title == "Tasks"
    assert [(a.id, a.text, a.parents) for a in link.anchors] == [
        ("tasks", "Tasks", ()),
        ("basics", "Basics", ("Tasks",)),
        ("options-of-a-task", "Options of a `Task`", ("Tasks",)),  # the id of the title as shown
        ("retrying", "Retrying", ("Tasks",)),
        ("id1", "Basics", ("Tasks", "Retrying")),  # a repeated title: Sphinx's auto id
    ]
    urls = [chunk_url(link, section.heading) for section in parse_file(page).sections]
    assert urls == [
        link.url,
        link.url + "#basics",
        link.url + "#options-of-a-task",
        link.url + "#retrying",
        link.url + "#id1",
    ]
    published = render_rst_article(RST_PAGE, "tasks.rst")  # docutils' writer, as Sphinx runs it
    assert all(f'id="{a.id}"' in published for a in link.anchors)
    assert 'id="task-options"' in published  # the label is on the page too; the section's own id is cited
