"""File parsers: Markdown heading paths, HTML, plain text, JSONL passages, PDF, decoding, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from anaphora.errors import InputError
from anaphora.ingest.markdown import parse_markdown
from anaphora.ingest.parsers import (
    ParsedDocument,
    Section,
    decode,
    parse_file,
    parse_html,
    parse_jsonl,
)
from tests.documents import make_pdf

pytestmark = pytest.mark.unit


def headings_and_texts(sections: list[Section]) -> list[tuple[list[str], str]]:
    return [(s.headings, s.text) for s in sections]


# -- Markdown ------------------------------------------------------------------------------------------------


def test_markdown_nested_heading_paths():
    text = (
        "Preamble line.\n\n"
        "# Guide\n\nIntro text.\n\n"
        "## Install\n\nRun pip.\n\n"
        "### On Linux\n\nUse apt.\n\n"
        "### On macOS\n\nUse brew.\n\n"
        "## Configure\n\nEdit the file.\n\n"
        "# Appendix\n\nExtra.\n"
    )
    assert headings_and_texts(parse_markdown(text)) == [
        ([], "Preamble line."),
        (["Guide"], "Intro text."),
        (["Guide", "Install"], "Run pip."),
        (["Guide", "Install", "On Linux"], "Use apt."),
        (["Guide", "Install", "On macOS"], "Use brew."),
        (["Guide", "Configure"], "Edit the file."),
        (["Appendix"], "Extra."),
    ]


def test_markdown_heading_property_joins_path():
    sections = parse_markdown("# A\n## B\n### C\nbody\n")
    assert headings_and_texts(sections) == [(["A", "B", "C"], "body")]
    assert sections[0].heading == "A > B > C"


def test_markdown_headings_inside_fences_are_ignored():
    text = (
        "# Real\n\nBefore.\n\n"
        "```bash\n# not a heading, a shell comment\n## neither\n```\n\n"
        "~~~\n# also code\n~~~\n\n"
        "After.\n\n"
        "## Child\n\nInside child.\n"
    )
    sections = parse_markdown(text)
    assert [s.headings for s in sections] == [["Real"], ["Real", "Child"]]
    assert "# not a heading, a shell comment" in sections[0].text
    assert "## neither" in sections[0].text
    assert "# also code" in sections[0].text
    assert sections[0].text.endswith("After.")


def test_markdown_closing_hashes_stripped_and_skipped_levels():
    sections = parse_markdown("# Top ##\ntext\n### Deep ###\nmore\n## Mid\nlast\n")
    assert [s.headings for s in sections] == [["Top"], ["Top", "Deep"], ["Top", "Mid"]]


def test_markdown_hash_without_space_is_not_a_heading():
    sections = parse_markdown("# Title\n#hashtag is text\n")
    assert headings_and_texts(sections) == [(["Title"], "#hashtag is text")]


def test_markdown_empty_sections_dropped():
    sections = parse_markdown("# A\n\n## B\n\ncontent\n\n## C\n\n")
    assert headings_and_texts(sections) == [(["A", "B"], "content")]


def test_markdown_heading_ending_in_hash_character_kept():
    assert parse_markdown("# Learn C#\n\ntext\n")[0].headings == ["Learn C#"]


# -- HTML ----------------------------------------------------------------------------------------------------


def test_html_headings_paragraphs_and_script_style_removed():
    html = """<!doctype html><html><head><title>T</title>
    <style>body { color: red; } .secretstyle {}</style>
    <script>var secretScript = 1;</script></head>
    <body>
      <h1>Manual</h1>
      <p>First paragraph.</p>
      <h2>Setup</h2>
      <p>Install it.</p>
      <script>alert("secretInline")</script>
      <ul><li>Step <b>one</b></li><li>Step two</li></ul>
      <h3>Details</h3>
      <p>Fine print.</p>
      <h2>Usage</h2>
      <p>Run it.</p>
      <noscript>secretNoscript</noscript>
    </body></html>"""
    sections = parse_html(html)
    assert headings_and_texts(sections) == [
        (["Manual"], "First paragraph."),
        (["Manual", "Setup"], "Install it.\n\nStep one\n\nStep two"),
        (["Manual", "Setup", "Details"], "Fine print."),
        (["Manual", "Usage"], "Run it."),
    ]
    everything = " ".join(s.text for s in sections)
    for secret in ("secretScript", "secretInline", "secretstyle", "color", "secretNoscript"):
        assert secret not in everything


def test_html_script_and_style_inside_collected_elements_removed():
    html = (
        "<h1>T</h1><p>Visible <script>hiddenScript()</script>text<style>.hiddenStyle{}</style></p>"
        "<table><tr><td>Cell<script>hiddenCell()</script></td></tr></table>"
    )
    sections = parse_html(html)
    assert headings_and_texts(sections) == [(["T"], "Visible text\n\nCell")]


def test_html_fallback_text_has_no_script_style_or_page_chrome():
    html = (
        "<html><body><nav>hiddenNav</nav><div>Plain <script>hiddenScript()</script>words"
        "<style>.x{}</style><noscript>hiddenNoscript</noscript></div><footer>hiddenFooter</footer></body></html>"
    )
    [section] = parse_html(html)
    for hidden in ("hiddenScript", ".x{}", "hiddenNoscript", "hiddenNav", "hiddenFooter"):
        assert hidden not in section.text
    assert "Plain" in section.text and "words" in section.text


def test_html_without_block_elements_falls_back_to_plain_text():
    sections = parse_html("<html><body><div>Just a div <span>with text</span></div></body></html>")
    assert len(sections) == 1
    assert sections[0].headings == []
    assert "Just a div" in sections[0].text and "with text" in sections[0].text


def test_html_pre_keeps_whitespace():
    sections = parse_html("<h1>Code</h1><pre>line 1\n    indented</pre>")
    assert sections == [Section(["Code"], "line 1\n    indented")]


# -- Files by suffix -----------------------------------------------------------------------------------------


def test_txt_file_is_one_section(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_text("  Plain notes.\n\nSecond paragraph.\n  ", encoding="utf-8")
    document = parse_file(path)
    assert document.passages is None
    assert document.warnings == []
    assert headings_and_texts(document.sections) == [([], "Plain notes.\n\nSecond paragraph.")]
    assert not document.is_empty


def test_empty_txt_is_empty(tmp_path: Path):
    path = tmp_path / "blank.txt"
    path.write_text("   \n\n", encoding="utf-8")
    document = parse_file(path)
    assert document.sections == []
    assert document.is_empty


@pytest.mark.parametrize("suffix", [".md", ".markdown", ".MD"])
def test_markdown_suffixes(tmp_path: Path, suffix: str):
    path = tmp_path / f"doc{suffix}"
    path.write_text("# H\n\nbody\n", encoding="utf-8")
    assert headings_and_texts(parse_file(path).sections) == [(["H"], "body")]


@pytest.mark.parametrize("suffix", [".html", ".htm"])
def test_html_suffixes(tmp_path: Path, suffix: str):
    path = tmp_path / f"page{suffix}"
    path.write_text("<h1>H</h1><p>body</p>", encoding="utf-8")
    assert headings_and_texts(parse_file(path).sections) == [(["H"], "body")]


def test_jsonl_passages_keep_ids_and_titles(tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    lines = [
        json.dumps({"id": "doc-7", "title": "Seven", "text": "The seventh passage."}),
        "",
        json.dumps({"id": 42, "text": "Numeric id, no title."}),
        json.dumps({"id": "x", "title": None, "text": "Null title."}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    document = parse_file(path)
    assert document.sections == []
    assert document.passages == [
        ("doc-7", "Seven", "The seventh passage."),
        ("42", "", "Numeric id, no title."),
        ("x", "", "Null title."),
    ]
    assert not document.is_empty


def test_empty_jsonl_is_empty(tmp_path: Path):
    path = tmp_path / "none.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    document = parse_file(path)
    assert document.passages == []
    assert document.is_empty


@pytest.mark.parametrize(
    "bad_line",
    ['{"id": "b"', '{"text": "no id"}', '{"id": "c"}', "[1, 2]", "42", '"just a string"'],
)
def test_jsonl_bad_line_names_the_line(tmp_path: Path, bad_line: str):
    path = tmp_path / "broken.jsonl"
    good = json.dumps({"id": "a", "text": "fine"})
    path.write_text(f"{good}\n\n{bad_line}\n{good}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        parse_file(path)
    assert "broken.jsonl" in caught.value.message
    assert "line 3" in caught.value.message
    assert caught.value.hint


def test_parse_jsonl_directly_names_file_and_line():
    with pytest.raises(InputError, match=r"f\.jsonl, line 2"):
        parse_jsonl('{"id": 1, "text": "a"}\nnot json\n', "f.jsonl")


@pytest.mark.parametrize("name", ["report.docx", "image.png", "Makefile"])
def test_unsupported_suffix_raises_input_error(tmp_path: Path, name: str):
    path = tmp_path / name
    path.write_bytes(b"whatever")
    with pytest.raises(InputError) as caught:
        parse_file(path)
    assert "unsupported file type" in caught.value.message
    assert name in caught.value.message
    assert ".md" in (caught.value.hint or "")


def test_no_suffix_reported_as_none(tmp_path: Path):
    path = tmp_path / "README"
    path.write_text("text", encoding="utf-8")
    with pytest.raises(InputError, match=r"\(none\)"):
        parse_file(path)


def test_non_utf8_bytes_decoded_with_warning(tmp_path: Path):
    path = tmp_path / "legacy.txt"
    path.write_bytes("Caf\u00e9 cr\u00e8me \u2013 na\u00efve".encode("cp1252"))
    document = parse_file(path)
    assert document.sections[0].text == "Caf\u00e9 cr\u00e8me \u2013 na\u00efve"
    assert len(document.warnings) == 1
    assert "UTF-8" in document.warnings[0]


def test_utf8_with_bom_decoded_without_warning(tmp_path: Path):
    path = tmp_path / "bom.md"
    path.write_bytes("\ufeff# Titre\n\nd\u00e9j\u00e0 vu\n".encode())
    document = parse_file(path)
    assert document.warnings == []
    assert headings_and_texts(document.sections) == [(["Titre"], "d\u00e9j\u00e0 vu")]


def test_decode_never_fails():
    text, warning = decode(bytes(range(256)))
    assert warning is not None
    assert len(text) == 256
    assert decode("ok \u00e9".encode()) == ("ok \u00e9", None)


# -- PDF -----------------------------------------------------------------------------------------------------


def test_real_tiny_pdf_text_extracted(tmp_path: Path):
    path = tmp_path / "hello.pdf"
    path.write_bytes(make_pdf("Hello World from Anaphora"))
    document = parse_file(path)
    assert document.warnings == []
    assert len(document.sections) == 1
    assert document.sections[0].headings == ["page 1"]
    assert "Hello World from Anaphora" in document.sections[0].text


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(os.urandom(1024), id="random-bytes"),
        pytest.param(b"%PDF-1.4\n" + os.urandom(400), id="header-then-garbage"),
        pytest.param(make_pdf("Hello World")[:150], id="truncated"),
        pytest.param(b"", id="empty"),
    ],
)
def test_corrupt_pdf_raises_input_error(tmp_path: Path, data: bytes):
    path = tmp_path / "broken.pdf"
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        parse_file(path)
    assert "broken.pdf" in caught.value.message
    assert "PDF" in caught.value.message


def test_parsed_document_is_empty_rules():
    assert ParsedDocument().is_empty
    assert ParsedDocument(sections=[Section(["h"], "  ")]).is_empty
    assert not ParsedDocument(sections=[Section([], "x")]).is_empty
    assert ParsedDocument(passages=[]).is_empty
    assert not ParsedDocument(passages=[("a", "", "t")]).is_empty
