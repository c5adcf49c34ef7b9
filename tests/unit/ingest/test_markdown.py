"""Doc-site Markdown pages: front matter as metadata, typed blocks, and the chunking rules built on them (tables keep
their header, lead-ins keep what they introduce, code stays with its sentence, tiny sections merge).

Snippets are short quotes from grafana/loki docs/sources (AGPL-3.0-only) and traefik/traefik docs/content (MIT).
"""

from __future__ import annotations

import pytest

from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.markdown import parse_markdown_page
from anaphora.ingest.parsers import parse_file

pytestmark = pytest.mark.unit


def words(text: str) -> int:
    return len(text.split())


def chunks_of(source: str, size: int = 200, overlap: int = 0):
    return chunk_sections(parse_markdown_page(source).sections, size=size, overlap=overlap, count=words)


LOKI_PAGE = """---
title: Log retention
menuTitle: Retention
description: Describes how Loki implements storage retention and retention configuration options.
weight: 600
---

# Log retention

Retention in Grafana Loki is achieved through the Compactor.
"""


def test_front_matter_is_metadata_and_the_title_heads_every_chunk():
    page = parse_markdown_page(LOKI_PAGE)
    assert page.metadata == {
        "title": "Log retention",
        "description": "Describes how Loki implements storage retention and retention configuration options.",
        "weight": 600,
    }
    chunks = chunks_of(LOKI_PAGE)
    assert [c.heading for c in chunks] == ["Log retention"]
    assert "menuTitle" not in chunks[0].text and "description:" not in chunks[0].text


def test_a_page_without_h1_is_named_by_its_front_matter_title():
    source = """---
title: "Traefik Docker Routing Documentation"
description: "This guide will teach you how to attach labels to your containers."
---

One of the best feature of Traefik is to delegate the routing configuration to the application level.

## Routing Configuration

With Docker, Traefik can leverage labels attached to a container to generate routing rules for Traefik.
"""
    headings = [s.heading for s in parse_markdown_page(source).sections]
    assert headings == [
        "Traefik Docker Routing Documentation",
        "Traefik Docker Routing Documentation > Routing Configuration",
    ]


def test_toml_front_matter_and_broken_yaml_never_reach_the_text():
    toml = parse_markdown_page('+++\ntitle = "Install"\nweight = 2\n+++\n\nRun the installer.\n')
    assert toml.metadata == {"title": "Install", "weight": 2}
    assert [s.text for s in toml.sections] == ["Run the installer."]
    broken = parse_markdown_page("---\ntitle: [unclosed\n---\n\nBody text here.\n")
    assert [s.text for s in broken.sections] == ["Body text here."]
    assert broken.warnings and "front matter" in broken.warnings[0]


def test_yaml_comments_in_code_fences_are_not_headings():
    source = "# OTLP\n\nConfigure it:\n\n```yaml\n# OTLP log ingestion configurations\notlp_config: {}\n```\n"
    sections = parse_markdown_page(source).sections
    assert [s.heading for s in sections] == ["OTLP"]
    assert "# OTLP log ingestion configurations" in sections[0].text


def test_a_dotted_key_split_by_br_reads_as_one_key_and_row_anchors_go():
    anchor = '<a id="opt-http-redirections" href="#opt-http-redirections" title="#opt-http-redirections">'
    source = f"""| Field | Description | Default | Required |
|:------|:------------|:--------|:---------|
| {anchor}`http.redirections.`<br />`entryPoint.to`</a> | The target. | "" | No |
"""
    (chunk,) = chunks_of(source)
    assert "`http.redirections.entryPoint.to`" in chunk.text
    assert "<a" not in chunk.text and "<br" not in chunk.text


def test_every_piece_of_a_long_table_carries_the_header_row():
    rows = "\n".join(f"| `option{i}` | What option {i} does to the router. | {i}s |" for i in range(40))
    source = f"## Options\n\n| Field | Description | Default |\n|---|---|---|\n{rows}\n"
    chunks = chunks_of(source, size=60)
    assert len(chunks) > 3
    for chunk in chunks:
        lines = chunk.text.splitlines()
        assert lines[0] == "| Field | Description | Default |" and lines[1] == "|---|---|---|"
        assert words(chunk.text) <= 60
    body = [line for c in chunks for line in c.text.splitlines()[2:]]
    assert body == [f"| `option{i}` | What option {i} does to the router. | {i}s |" for i in range(40)]


def test_a_row_too_long_for_its_header_reads_as_lines_with_its_cells_breaks_kept():
    """A row longer than a chunk is quoted as ``column: value`` lines; the ``<br/>`` of its description (a list,
    a second paragraph) stays a line break there, where in the one-line table row it can only be a space."""
    description = (
        'By default, only "running" containers count.<br/><br/>When this label is set to true, Traefik will:<br/>'
        "- Keep the router configuration<br/>- Return 503 for stopped containers"
    )
    row = f"| `traefik.docker.allownonrunning` | {description} | `true` |"
    source = f"| Label | Description | Value |\n|---|---|---|\n{row}\n"
    (short,) = chunks_of(source)
    assert '`traefik.docker.allownonrunning` | By default, only "running" containers count. When this' in short.text
    (record,) = chunks_of(source, size=34)
    assert record.text.splitlines() == [
        "Label: `traefik.docker.allownonrunning`",
        'Description: By default, only "running" containers count.',
        "",
        "When this label is set to true, Traefik will:",
        "- Keep the router configuration",
        "- Return 503 for stopped containers",
        "Value: `true`",
    ]


def test_a_lead_in_is_never_the_end_of_a_chunk():
    filler = " ".join(f"Sentence {i} says something about charts." for i in range(6))
    source = f"""## Helm

{filler}

Use the following command to add the Fluent Helm charts repository:

```shell
helm repo add fluent https://fluent.github.io/helm-charts
```
"""
    chunks = chunks_of(source, size=45)
    holding = [c for c in chunks if "Use the following command" in c.text]
    assert len(holding) == 1 and "helm repo add fluent" in holding[0].text
    assert not any(c.text.rstrip().endswith(":") for c in chunks)


def test_a_code_block_stays_with_the_sentence_that_introduces_it():
    filler = " ".join(f"Point {i} of the retention story is here." for i in range(5))
    source = f"""## Retention Configuration

{filler}

This Compactor configuration example activates retention.

```yaml
compactor:
  retention_enabled: true
  delete_request_store: gcs
```
"""
    chunks = chunks_of(source, size=50)
    (holding,) = [c for c in chunks if "retention_enabled: true" in c.text]
    assert "This Compactor configuration example activates retention." in holding.text


def test_every_piece_of_a_long_code_block_carries_the_sentence_that_introduces_it():
    """A block too long for one chunk is cut at lines; a chunk that starts inside it begins with the sentence that
    says what it is (alone, "  - --certificatesresolvers.le.acme.storage=..." is a fragment of nothing)."""
    lines = "\n".join(f'  - "--certificatesresolvers.le.acme.option{i}=value{i}"' for i in range(30))
    source = (
        f"## Let's Encrypt\n\nAdd the certificate resolver to the command section:\n\n```yaml\ncommand:\n{lines}\n```\n"
    )
    chunks = chunks_of(source, size=40)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.text.startswith("Add the certificate resolver to the command section:\n\n```yaml\n")
        assert chunk.text.count("Add the certificate resolver") == 1
        assert words(chunk.text) <= 40
    body = [line for c in chunks for line in c.text.splitlines() if line.startswith("  - ")]
    assert body == lines.splitlines()  # every line once, in order


def test_a_code_block_carried_into_the_next_chunk_as_overlap_keeps_its_sentence():
    filler = " ".join(f"Sentence {i} says something about certificates." for i in range(3))
    tail = " ".join(f"Later {i} covers renewal timing in detail." for i in range(3))
    source = f"## Setup\n\n{filler}\n\nCreate a directory:\n\n```bash\nmkdir -p letsencrypt\n```\n\n{tail}\n"
    chunks = chunks_of(source, size=15, overlap=5)
    assert chunks[2].text.startswith("Create a directory:\n\n```bash\nmkdir -p letsencrypt\n```\n\nLater 0")
    assert not any(c.text.startswith("```") for c in chunks)  # never a bare block without what it is for


def test_every_piece_of_a_long_list_carries_the_sentence_that_introduces_it():
    items = "\n".join(f"- Step {i}: restart the ingester number {i} and wait for it." for i in range(20))
    source = f"## Scaling down\n\nBefore you remove ingesters, do the following:\n\n{items}\n"
    chunks = chunks_of(source, size=40)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.text.startswith("Before you remove ingesters, do the following:\n\n- Step ")
        assert words(chunk.text) <= 40
    steps = [line for c in chunks for line in c.text.splitlines() if line.startswith("- Step")]
    assert steps == items.splitlines()


def test_tab_labels_lead_their_code_and_diagrams_are_not_indexed():
    source = """## Enable

```yaml tab="File (YAML)"
api:
  dashboard: true
```

```mermaid
graph LR
  client --> traefik
```
"""
    (chunk,) = chunks_of(source)
    assert chunk.text.startswith("File (YAML):\n\n```yaml\napi:")
    assert "mermaid" not in chunk.text and "-->" not in chunk.text


def test_tiny_sibling_sections_merge_under_their_parent():
    source = """# Labels

## Port

Register a port.

## Scheme

Overrides the default scheme.

## Other Page Part

Something else entirely here.
"""
    chunks = chunks_of(source, size=200)
    assert len(chunks) == 1
    assert chunks[0].heading == "Labels"
    assert "Port\n\nRegister a port." in chunks[0].text and "Scheme\n\nOverrides the default scheme." in chunks[0].text


def test_sections_too_big_together_stay_apart():
    one = " ".join(["alpha"] * 30)
    two = " ".join(["beta"] * 30)
    chunks = chunks_of(f"# Page\n\n## One\n\n{one}.\n\n## Two\n\n{two}.\n", size=40)
    assert [c.heading for c in chunks] == ["Page > One", "Page > Two"]


def test_markdown_files_are_parsed_as_doc_site_pages(tmp_path):
    page = tmp_path / "retention.md"
    page.write_text(LOKI_PAGE)
    document = parse_file(page)
    assert document.metadata["title"] == "Log retention"
    assert document.sections[0].blocks[0].kind == "text"
