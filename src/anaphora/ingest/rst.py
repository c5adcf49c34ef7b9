"""reStructuredText pages (Sphinx docs) read with docutils into the same sections of typed blocks the Markdown
reader builds (:mod:`anaphora.ingest.markdown`), so one chunker keeps a table's header with its rows and a code
block with the sentence that introduces it.

Section titles make the heading path (the page title first, as for Markdown). Sphinx's directives and roles are
unwrapped by :mod:`anaphora.ingest.sphinx`; docutils' system messages (errors about markup it cannot read) and the
raw markup they quote never reach the text; files and raw HTML a page names are never read
(``file_insertion_enabled`` and ``raw_enabled`` off). No docutils transform runs: the tree is read as parsed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from docutils import frontend, nodes, utils
from docutils.parsers.rst import Parser

from anaphora.errors import InputError
from anaphora.ingest.dialects import FenceInfo, image_text
from anaphora.ingest.markdown import CELL_BREAK, code_blocks, table_blocks
from anaphora.ingest.sections import Block, Section
from anaphora.ingest.sphinx import sphinx_namespace, stray_roles
from anaphora.store.sources import Anchor

LINE_LIMIT = 10_000  # docutils' line_length_limit: a page with a longer line is refused by name, not parsed empty
# nodes whose text a reader of the page does not read
_SKIPPED = (
    nodes.system_message,
    nodes.comment,
    nodes.target,
    nodes.substitution_definition,
    nodes.pending,
    nodes.raw,
    nodes.footnote_reference,
    nodes.citation_reference,
    nodes.transition,
    nodes.meta,
    nodes.Invisible,
)
_LISTS = (nodes.bullet_list, nodes.enumerated_list)
_ROLE_BEFORE_LITERAL = re.compile(r"(?<![\w`]):(?:[A-Za-z0-9]+[-._+:])*[A-Za-z0-9]+:$")

# text that is reStructuredText, not plain text: a directive line, an interpreted-text role, a section adornment
_RST_SIGNS = re.compile(
    r"^\.\. [A-Za-z][\w:.+-]*::(?:\s|$)|(?<![\w`]):[A-Za-z][\w:.+-]*:`[^`\s]|^([=\-~^\"'`#*+_])\1{3,}\s*$", re.MULTILINE
)


def looks_like_rst(text: str) -> bool:
    """Whether plain text (a ``.txt`` include of a Sphinx tree) is reStructuredText: two signs of its markup."""
    return len(_RST_SIGNS.findall(text[:200_000], 0)) >= 2


def _settings():
    settings = frontend.get_default_settings(Parser)
    settings.report_level = 5  # nothing written to stderr; the messages are dropped from the tree below
    settings.halt_level = 5
    settings.warning_stream = io.StringIO()
    settings.file_insertion_enabled = False
    settings.raw_enabled = False
    settings.syntax_highlight = "none"
    settings.line_length_limit = LINE_LIMIT
    settings.tab_width = 4
    settings.auto_id_prefix = "id"  # Sphinx's: a repeated section title's id is id1, id2, ... (docutils' own: %)
    return settings


def parse_rst(text: str, name: str = "page.rst") -> list[Section]:
    """Sections of one reStructuredText page. Raises :class:`InputError` for a line too long to parse."""
    return _read(text, name).sections


def rst_anchors(text: str, name: str = "page.rst") -> tuple[str, tuple[Anchor, ...]]:
    """(title, the ids of the page's sections) as Sphinx publishes them: each section's first id, the one docutils
    gives its title when it parses it (``make_id`` of the title; ``id1``, ``id2``, ... for a title used before), which
    Sphinx writes on the ``<section>``. The texts are those :func:`parse_rst` gives the heading paths, so a chunk's
    heading path finds its section. Raises :class:`InputError` as :func:`parse_rst` does."""
    reader = _read(text, name)
    return (reader.anchors[0].text if reader.anchors else ""), tuple(reader.anchors)


def _read(text: str, name: str) -> _Reader:
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > LINE_LIMIT:
            raise InputError(
                f"{name}, line {number}: longer than {LINE_LIMIT:,} characters, which reStructuredText is not read "
                "past",
                hint="wrap the line, or save the file as .txt to ingest it as plain text",
            )
    document = utils.new_document(name, _settings())
    with sphinx_namespace(text):
        Parser().parse(text, document)
    reader = _Reader(_labels(document), _substitutions(document))
    reader.body(document.children)
    reader.flush()
    return reader


def _labels(document: nodes.document) -> dict[str, str]:
    """Each ``.. _label:`` placed right before a section title -> that title (what Sphinx shows for ``:ref:``)."""
    found: dict[str, str] = {}
    waiting: list[str] = []
    for node in document.findall(nodes.Element):
        if isinstance(node, nodes.target) and not node.get("refuri"):
            waiting.extend(node.get("names", []))
        elif isinstance(node, nodes.section):
            title = node.next_node(nodes.title)
            for label in waiting:
                found[label] = title.astext() if title else label
            waiting.clear()
        elif isinstance(node, (nodes.paragraph, nodes.literal_block, nodes.table)):
            waiting.clear()
    return found


def _substitutions(document: nodes.document) -> dict[str, str]:
    return {name: node.astext() for node in document.findall(nodes.substitution_definition) for name in node["names"]}


@dataclass
class _Reader:
    """Walks a doctree into sections: blocks gathered under the current title path, flushed at each new title."""

    labels: dict[str, str]
    substitutions: dict[str, str]
    sections: list[Section] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)

    def flush(self) -> None:
        if self.blocks:
            self.sections.append(Section(list(self.path), "\n\n".join(b.text for b in self.blocks), self.blocks))
        self.blocks = []

    def body(self, children: Iterable[nodes.Node]) -> None:
        for child in children:
            if isinstance(child, nodes.section):
                self.flush()
                title = child.next_node(nodes.title)
                shown = self.inline(title).strip() if title else ""
                if shown and child["ids"]:
                    self.anchors.append(Anchor(child["ids"][0], shown, tuple(h for h in self.path if h)))
                self.path.append(shown)
                self.body(c for c in child.children if not isinstance(c, nodes.title))
                self.flush()
                self.path.pop()
            else:
                self.blocks.extend(self.block(child))

    def block(self, node: nodes.Node) -> list[Block]:
        """The blocks of one body element."""
        if isinstance(node, _SKIPPED) or (isinstance(node, nodes.topic) and "contents" in node["classes"]):
            return []
        if isinstance(node, (nodes.paragraph, nodes.line)):
            text = self.inline(node).strip()
            return [Block("text", text)] if text else []
        if isinstance(node, (nodes.literal_block, nodes.doctest_block)):
            language = node.get("language") or next((c for c in node["classes"] if c != "code"), "")
            language = language or ("pycon" if isinstance(node, nodes.doctest_block) else "")
            return code_blocks(FenceInfo(language, ""), node.astext())
        if isinstance(node, _LISTS):
            return self.list_blocks(node)
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, (nodes.rubric, nodes.title)):
            text = self.inline(node).strip()
            return [Block("label", f"{text.rstrip(':')}:")] if text else []
        if isinstance(node, nodes.image):
            alt = image_text(str(node.get("alt", "")), str(node.get("uri", "")))
            return [Block("text", alt)] if alt else []
        if isinstance(node, nodes.definition_list_item):
            return self.labelled(node.next_node(nodes.term), node.next_node(nodes.definition))
        if isinstance(node, nodes.field):
            return self.labelled(node.children[0], node.children[1])
        if isinstance(node, nodes.option_list_item):
            options = ", ".join(o.astext() for o in node.findall(nodes.option))
            return self.labelled(nodes.paragraph("", f"`{options}`"), node.next_node(nodes.description))
        if isinstance(node, nodes.line_block):
            text = "\n".join(self.inline(line).strip() for line in node.findall(nodes.line))
            return [Block("text", text)] if text.strip() else []
        if isinstance(node, nodes.Element):  # admonitions, topics, quotes, containers, figures: their content
            return [b for child in node.children for b in self.block(child)]
        return []

    def labelled(self, term: nodes.Node | None, body: nodes.Node | None) -> list[Block]:
        """A term (a definition list's, a field's name, an option) before its body: "term: first sentence ..."."""
        name = self.inline(term).strip() if term is not None else ""
        blocks = self.block(body) if body is not None else []
        if not name:
            return blocks
        if blocks and blocks[0].kind == "text":  # a "term" ending in a comma is a wrapped line (a table cell's)
            joiner = " " if name.rstrip("`").endswith((",", "(")) else ": "
            return [Block("text", f"{name}{joiner}{blocks[0].text}"), *blocks[1:]]
        return [Block("label", f"{name.rstrip(':')}:"), *blocks] if blocks else []

    def list_blocks(self, node: nodes.Element, indent: str = "") -> list[Block]:
        """A list as list blocks (nested items indented under theirs); a code block or table inside an item is a
        block of its own after the item text that introduces it, as in Markdown."""
        blocks: list[Block] = []
        items: list[str] = []
        number = int(node.get("start", 1))
        for item in node.children:
            if not isinstance(item, nodes.list_item):
                continue
            marker = f"{indent}{number}. " if isinstance(node, nodes.enumerated_list) else f"{indent}- "
            number += 1
            lead, texts = marker, []
            for child in item.children:
                if isinstance(child, _LISTS):
                    nested = self.list_blocks(child, indent + "  ")
                    items.extend(self._item(lead, texts, indent))
                    lead, texts = "", []
                    if nested and nested[0].kind == "list":
                        items.extend(nested[0].parts)
                        nested = nested[1:]
                    if nested:
                        blocks.extend(self._flush_items(items))
                        blocks.extend(nested)
                    continue
                for block in self.block(child):
                    if block.kind == "text":
                        texts.append(block.text)
                        continue
                    items.extend(self._item(lead, texts, indent))
                    lead, texts = "", []
                    blocks.extend(self._flush_items(items))
                    blocks.append(block)
            items.extend(self._item(lead, texts, indent))
        blocks.extend(self._flush_items(items))
        return blocks

    @staticmethod
    def _item(lead: str, texts: list[str], indent: str) -> list[str]:
        """One item's paragraphs: the first after the marker, the others on lines indented under it."""
        if not texts:
            return []
        return [(lead or f"{indent}  ") + f"\n{indent}  ".join(texts)]

    @staticmethod
    def _flush_items(items: list[str]) -> list[Block]:
        if not items:
            return []
        block = Block("list", "\n".join(items), parts=tuple(items))
        items.clear()
        return [block]

    def table(self, node: nodes.table) -> list[Block]:
        """Grid, simple and list tables: header rows (``thead``) and body rows of cells, as Markdown tables are."""
        title = node.next_node(nodes.title)
        rows: list[list[str]] = []
        header_rows = 0
        for row in node.findall(nodes.row):
            cells = [CELL_BREAK.join(self.cell(entry)) for entry in row.children if isinstance(entry, nodes.entry)]
            rows.append(cells)
            header_rows += isinstance(row.parent, nodes.thead)
        label = self.block(title) if title is not None and title.parent is node else []
        return label + table_blocks(rows, header_rows)

    def cell(self, entry: nodes.entry) -> list[str]:
        return [b.text.replace("\n", CELL_BREAK) for child in entry.children for b in self.block(child)]

    def inline(self, node: nodes.Node) -> str:
        """Inline markup as plain text: literals and code roles in backticks, references as their text, a
        ``:ref:`` as the title of the section it names, substitutions resolved, messages dropped."""
        if isinstance(node, nodes.Text):  # role markup inside emphasis is not parsed (no nesting): its text only
            return stray_roles(node.astext().replace("\n", " "))
        if isinstance(node, (nodes.system_message, nodes.target, nodes.footnote_reference, nodes.raw)):
            return "" if not isinstance(node, nodes.target) else self._children(node)
        if isinstance(node, nodes.literal):
            return f"`{node.astext()}`"
        if isinstance(node, nodes.image):
            return image_text(str(node.get("alt", "")), str(node.get("uri", "")))
        if isinstance(node, nodes.substitution_reference):
            return self.substitutions.get(node.get("refname", ""), "")
        if isinstance(node, nodes.inline) and node.get("reflabel"):
            return self.labels.get(node["reflabel"], node.astext())
        return self._children(node)

    def _children(self, node: nodes.Node) -> str:
        children = list(getattr(node, "children", ()))
        parts = [self.inline(child) for child in children]
        for index, child in enumerate(children[:-1]):  # ":setting:``name``": a role before a literal, not parsed
            if isinstance(child, nodes.Text) and isinstance(children[index + 1], nodes.literal):
                parts[index] = _ROLE_BEFORE_LITERAL.sub("", parts[index])
        return "".join(parts)
