"""Markdown pages as a docs site has them: front matter read as metadata (python-frontmatter), the dialects unwrapped
(:mod:`anaphora.ingest.dialects`), then the CommonMark + tables parse of markdown-it-py walked into sections of
typed blocks (paragraphs, lists, code, tables), so the chunker can keep a table's header with its rows and a code
block with the sentence that introduces it.

The page title (front matter ``title``, else the first H1) is the first heading of every section, so chunks and
citations name the page even when it has no H1 (many MkDocs pages keep the title only in front matter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from anaphora.ingest.dialects import (
    HEADING_ATTRIBUTES,
    FenceInfo,
    drop_escaped_tags,
    fence_info,
    html_text,
    image_text,
    strip_inline_html,
    unwrap,
)
from anaphora.ingest.nesting import cap_nesting
from anaphora.ingest.sections import Block, Section

METADATA_KEYS = ("title", "description", "weight", "aliases", "slug", "url", "permalink")  # the last three: urls.py
_BR = "\x00"  # where an inline <br> was: nothing between two code spans (a dotted key split over lines), else a space
CELL_BREAK = _BR  # a line break inside a table cell, for other readers that build cells (table_blocks)


@dataclass(slots=True)
class MarkdownPage:
    sections: list[Section]
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@cache
def _parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


@cache
def _handlers() -> tuple:
    """python-frontmatter's YAML handler, and TOML read with the standard library (its own TOML handler needs the
    unmaintained ``toml`` package)."""
    import tomllib

    import frontmatter
    from frontmatter.default_handlers import BaseHandler

    class TOMLFrontMatter(BaseHandler):
        FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
        START_DELIMITER = END_DELIMITER = "+++"

        def load(self, fm: str, **kwargs: object) -> dict[str, Any]:
            return tomllib.loads(fm)

    return (frontmatter.YAMLHandler(), TOMLFrontMatter())


def split_front_matter(text: str) -> tuple[dict[str, Any], str, list[str]]:
    """(metadata, body, warnings): YAML (``---``) or TOML (``+++``) front matter read by python-frontmatter. Front
    matter that does not parse is still removed from the body (it is never text), with a warning."""
    import frontmatter

    handler = frontmatter.detect_format(text, _handlers()) if text.startswith(("---", "+++")) else None
    if handler is None:
        return {}, text, []
    try:
        front, body = handler.split(text)
    except ValueError:  # an opening delimiter that is never closed: not front matter
        return {}, text, []
    try:
        loaded = handler.load(front)
    except Exception as exc:  # yaml.YAMLError, tomllib.TOMLDecodeError: the parsers share no base class
        return {}, body, [f"front matter could not be read ({type(exc).__name__}); left out"]
    metadata = loaded if isinstance(loaded, dict) else {}
    return {k: metadata[k] for k in METADATA_KEYS if metadata.get(k) not in (None, "", [])}, body, []


def parse_markdown_page(text: str) -> MarkdownPage:
    metadata, body, warnings = split_front_matter(text)
    title = str(metadata.get("title") or "").strip()
    tokens = _parser().parse(cap_nesting(unwrap(body)))
    sections = _sections(tokens, title)
    return MarkdownPage(sections, metadata, warnings)


def markdown_sections(text: str) -> list[Section]:
    """Sections of plain CommonMark (no front matter, no dialect): what :mod:`anaphora.ingest.html_markdown` makes
    of a web page. The first H1 is the page title, the root of every heading path, as for a page without front
    matter."""
    return _sections(_parser().parse(cap_nesting(text)), "")


def parse_markdown(text: str) -> list[Section]:
    return parse_markdown_page(text).sections


def _same(a: str, b: str) -> bool:
    return re.sub(r"\W+", " ", a).strip().lower() == re.sub(r"\W+", " ", b).strip().lower()


def _sections(tokens: Sequence, title: str) -> list[Section]:
    sections: list[Section] = []
    path: list[tuple[int, str]] = [(0, title)] if title else []
    blocks: list[Block] = []

    def flush() -> None:
        if blocks:
            sections.append(Section([h for _, h in path], "\n\n".join(b.text for b in blocks), list(blocks)))
        blocks.clear()

    index = 0
    while index < len(tokens):
        token = tokens[index]
        kind = token.type
        if kind == "heading_open":
            flush()
            level = int(token.tag[1])
            heading = HEADING_ATTRIBUTES.sub("", render_inline(tokens[index + 1].children or [])).strip()
            if level == 1 and (not title or _same(heading, title)):
                path = [(0, heading or title)]  # the page's own title: the root of every heading path
            elif heading:
                path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, heading)]
            index += 3
            continue
        end = _block_end(tokens, index)
        blocks.extend(_block(tokens[index:end]))
        index = end
    flush()
    return sections


def _block_end(tokens: Sequence, start: int) -> int:
    """The index after the block that starts at ``start`` (an opening token up to its matching close)."""
    token = tokens[start]
    if token.nesting != 1:
        return start + 1
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index + 1
    return len(tokens)


def _block(tokens: Sequence) -> list[Block]:
    """The blocks of one top-level token group: a paragraph, a list, a fence, a table, a quote, raw HTML."""
    first = tokens[0]
    kind = first.type
    if kind == "paragraph_open":
        text = render_inline(tokens[1].children or []).strip()
        return [Block("text", text)] if text else []
    if kind in ("fence", "code_block"):
        return _code(first)
    if kind in ("bullet_list_open", "ordered_list_open"):
        return _list_blocks(tokens)
    if kind == "table_open":
        return _table(tokens)
    if kind == "blockquote_open":  # its content, without the quote
        inner, index = [], 1
        while index < len(tokens) - 1:
            end = _block_end(tokens, index)
            inner.extend(_block(tokens[index:end]))
            index = end
        return inner
    if kind == "html_block":
        return [Block("text", p.strip()) for p in re.split(r"\n\s*\n", html_text(first.content)) if p.strip()]
    return []


def _code(token) -> list[Block]:
    return code_blocks(fence_info(token.info if token.type == "fence" else ""), token.content)


def code_blocks(info: FenceInfo, content: str) -> list[Block]:
    """A code block (after its label line, when it has one) as the chunker keeps it: fenced, never cut from the
    sentence before it. Shared with the reStructuredText reader (:mod:`anaphora.ingest.rst`)."""
    content = content.rstrip("\n")
    if info.is_diagram or not content.strip():  # diagram source answers nothing; an empty block says nothing
        return []
    lines = tuple(content.split("\n"))
    opening = f"```{info.language}"
    code = Block("code", f"{opening}\n{content}\n```", head=opening, parts=lines)
    return [Block("label", f"{info.label.rstrip(':')}:"), code] if info.label else [code]


@dataclass(slots=True)
class _Item:
    """The text of one list item gathered so far: its first piece starts with the marker, later ones (after a code
    block inside the item) are indented under it."""

    marker: str
    indent: str
    lines: list[str] = field(default_factory=list)
    started: bool = False

    def flush(self) -> list[str]:
        if not self.lines:
            return []
        first, *rest = "\n".join(self.lines).split("\n")
        lead = self.indent if self.started else self.marker
        self.lines.clear()
        self.started = True
        return [lead + first + "".join(f"\n{self.indent}{line}" if line.strip() else "\n" for line in rest)]


def _list_blocks(tokens: Sequence, indent: str = "") -> list[Block]:
    """A list as blocks: runs of items (``- item`` or ``3. item``, nested items indented under theirs) as list
    blocks, and each code block or table inside an item as a block of its own, so the chunker never cuts one."""
    blocks: list[Block] = []
    items: list[str] = []
    ordered = tokens[0].type == "ordered_list_open"
    number = int(tokens[0].attrGet("start") or 1) if ordered else 0

    def flush_items() -> None:
        if items:
            blocks.append(Block("list", "\n".join(items), parts=tuple(items)))
            items.clear()

    index = 1
    while index < len(tokens) - 1:
        if tokens[index].type != "list_item_open":
            index += 1
            continue
        end = _block_end(tokens, index)
        marker = f"{number}." if ordered else "-"
        number += 1
        item = _Item(f"{indent}{marker} ", f"{indent}  ")
        inner = index + 1
        while inner < end - 1:
            stop = _block_end(tokens, inner)
            group = tokens[inner:stop]
            nested = group[0].type in ("bullet_list_open", "ordered_list_open")
            for block in _list_blocks(group, indent + "  ") if nested else _block(group):
                if block.kind == "list":
                    items.extend(item.flush())
                    items.extend(block.parts)
                    item.started = True
                elif block.kind == "text":
                    item.lines.append(block.text)
                else:  # code, a label, a table: a block of its own, after the item text that introduces it
                    items.extend(item.flush())
                    flush_items()
                    blocks.append(block)
            inner = stop
        items.extend(item.flush())
        index = end
    flush_items()
    return blocks


def _table(tokens: Sequence) -> list[Block]:
    rows: list[list[str]] = []
    header_rows = 0
    in_head = False
    for token in tokens:
        if token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            rows.append([])
            header_rows += in_head
        elif token.type == "inline" and rows:
            rows[-1].append(inline_text(token.children or []).strip())
    return table_blocks(rows, header_rows)


def table_blocks(rows: list[list[str]], header_rows: int) -> list[Block]:
    """A table as one block: its header rows (the first row when it has none marked), the body rows under them and
    each body row as a record. Cells may hold ``<br>`` markers (:func:`inline_text`). Shared with the
    reStructuredText reader."""
    if not rows:
        return []
    lines = ["| " + " | ".join(_cell(c).replace("|", "\\|") for c in cells) + " |" for cells in rows]
    width = max(len(cells) for cells in rows)
    first = max(1, header_rows)
    head = "\n".join([*lines[:first], "|" + "---|" * width])
    body = tuple(lines[first:])
    text = head + ("\n" + "\n".join(body) if body else "")
    names = [_cell(name) for name in rows[0]]
    records = tuple(_record(names, cells) for cells in rows[first:])
    return [Block("table", text, head=head, parts=body, records=records)]


def _joined(text: str, line_break: str = " ") -> str:
    """``text`` with each ``<br>`` as ``line_break`` (none between two code spans: a dotted key split over lines)."""
    return re.sub(r"[ \t]{2,}", " ", text.replace(f"`{_BR}`", "").replace(_BR, line_break))


def _cell(text: str, line_break: str = " ") -> str:
    return _joined(text, line_break).strip()


def _record(names: Sequence[str], values: Sequence[str]) -> str:
    """A table row as ``column: value`` lines under the header's ``names`` (cleaned cells), which need no header row
    to be read (what a row too long for a chunk with its header becomes), each ``<br>`` of a cell a line break: a
    description's list stays a list."""
    lines = []
    for name, raw in zip(names, values, strict=False):
        value = _cell(raw, "\n")
        if value:
            lines.append(f"{name}: {value}" if name else value)
    return "\n".join(lines)


def render_inline(children: Sequence) -> str:
    """Inline tokens as plain text: code spans in backticks, links as their text, images as their alt text (badges
    and tracking pixels: nothing), emphasis and inline HTML tags dropped."""
    return _joined(inline_text(children))


def inline_text(children: Sequence) -> str:
    """:func:`render_inline`'s text with each ``<br>`` still a marker (a table cell's: a space in its row, a line
    break in its record, :func:`_cell`)."""
    out: list[str] = []
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(drop_escaped_tags(token.content))
        elif kind == "code_inline":
            out.append(f"`{token.content}`")
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "image":
            out.append(image_text(token.content, str(token.attrGet("src") or "")))
        elif kind == "html_inline":
            out.append(
                _BR if re.match(r"<br\s*/?>", token.content, re.IGNORECASE) else strip_inline_html(token.content)
            )
    return "".join(out)
