"""A web page's main content as CommonMark, so that a crawled page is read by the same Markdown reader and chunker as
a folder's Markdown page: headings become the heading path, and code blocks, lists and tables stay typed blocks (a
table's header kept with its rows, a code block with the sentence before it) instead of one run of flattened text.

The conversion is markdownify's (MIT, built on BeautifulSoup, which ingest depends on already). html2text was
passed over for its GPL-3.0 licence, which would bind every project that embeds Anaphora, and html-to-markdown for
being a compiled extension: a platform wheel for a step that is not on the hot path. Some of markdownify's rules
are changed where the Markdown reader would read its output differently from the page:

- text is escaped for CommonMark (``escape_misc``): ``<placeholder>`` in a sentence stays text, not an HTML tag the
  reader drops, and a line starting ``1.`` or ``#`` stays a sentence;
- a code block's language is read from the class the generators put it in (``language-yaml``, ``lang-yaml``,
  Sphinx's ``highlight-yaml``, docutils' ``code yaml literal-block``), a ``<br>`` inside it (a highlighter's line
  break) is a newline, and its fence is longer than any line of backticks inside it (a Markdown example that shows a
  fenced block);
- a ``|`` inside a table cell's code is escaped, or the reader would split the cell there.
"""

from __future__ import annotations

import re
from functools import cache

from anaphora.errors import require

_FENCE_LINE = re.compile(r"^[ \t]*(`{3,})", re.MULTILINE)
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang|highlight)-([\w+#.-]+)")


def _language(pre) -> str:
    """The language a generator names on a ``<pre>``, its ``<code>`` or the block around it ('' when none):
    ``language-x`` / ``lang-x`` (markdown-it, Prism, highlight.js), ``highlight-x`` (Sphinx), or docutils' own
    ``<pre class="code x literal-block">``."""
    candidates = [pre, pre.find("code"), pre.parent, pre.parent.parent if pre.parent is not None else None]
    for element in candidates:
        if element is None:
            continue
        classes = element.get_attribute_list("class", [])
        found = _LANGUAGE.search(" ".join(classes))
        if found and found.group(1).lower() != "default":  # Sphinx's name for "not given"
            return found.group(1)
        if element is pre and "literal-block" in classes and "code" in classes:
            named = [c for c in classes if c not in ("code", "literal-block")]
            return named[0] if named else ""
    return ""


@cache
def _converter():
    markdownify = require("markdownify", package="markdownify", extra="site", purpose="ingesting a web site")

    class Converter(markdownify.MarkdownConverter):
        def convert_br(self, el, text, parent_tags):
            if "pre" in parent_tags:
                return "\n" + text
            return super().convert_br(el, text, parent_tags)

        def convert_pre(self, el, text, parent_tags):
            converted = super().convert_pre(el, text, parent_tags)
            inner = max((len(run) for run in _FENCE_LINE.findall(text)), default=0)
            if inner < 3:
                return converted
            fence = "`" * (inner + 1)  # a fence longer than any inside, or the block would end at the first
            return f"\n\n{fence}{converted.strip(chr(10))[3:-3]}{fence}\n\n"

        def convert_code(self, el, text, parent_tags):
            converted = super().convert_code(el, text, parent_tags)
            if "_inline" in parent_tags and not parent_tags & {"pre"} and el.find_parent(["td", "th"]) is not None:
                return converted.replace("|", r"\|")
            return converted

    return Converter(
        heading_style=markdownify.ATX,
        escape_misc=True,
        bullets="-",
        code_language_callback=_language,
    )


def html_to_markdown(html: str) -> str:
    """CommonMark for ``html`` (a fragment or a page)."""
    return _converter().convert(html)
