"""Block nesting capped before Markdown is parsed (anaphora.ingest.nesting): a deep line keeps its text and hides
nothing after it."""

from __future__ import annotations

import pytest

from anaphora.ingest.markdown import parse_markdown
from anaphora.ingest.nesting import MAX_DEPTH, cap_nesting

pytestmark = pytest.mark.unit


def page_text(markdown: str) -> str:
    return "\n".join(section.text for section in parse_markdown(markdown))


@pytest.mark.parametrize("marker", [">", "> ", "- ", "1. ", "> - "])
def test_a_line_nested_100000_deep_keeps_its_text_and_the_lines_after_it(marker: str) -> None:
    text = page_text(f"# Page\n\nBefore.\n\n{marker * 100_000}Deep words here.\n\nAfter the deep line.\n")
    assert "Before." in text and "Deep words here." in text and "After the deep line." in text


def test_shallow_nesting_is_left_as_written() -> None:
    written = "> quoted\n> > twice\n- item\n  - nested\n1. one\n" + "> " * MAX_DEPTH + "deep but allowed\n"
    assert cap_nesting(written) == written


def test_a_deep_run_keeps_its_first_markers() -> None:
    assert cap_nesting("> " * 50 + "text") == "> " * MAX_DEPTH + "text"
