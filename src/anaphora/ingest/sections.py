"""What a parsed file is made of: sections under their heading path, a Markdown section as typed blocks. Its own
module so that the parsers and the Markdown reader that builds on them share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a Markdown section: ``text`` (a paragraph), ``label`` (a tab's or block's title, introducing
    what follows), ``list`` (``parts``: its items), ``code`` (``head``: the opening fence, ``parts``: its lines) or
    ``table`` (``head``: the header and delimiter rows, ``parts``: the body rows, ``records``: each body row as
    ``column: value`` lines, for a row too long to be quoted under its header)."""

    kind: str
    text: str
    head: str = ""
    parts: tuple[str, ...] = ()
    records: tuple[str, ...] = ()


@dataclass(slots=True)
class Section:
    headings: list[str]
    text: str
    blocks: list[Block] = field(default_factory=list)  # Markdown only: the text as typed blocks, for the chunker

    @property
    def heading(self) -> str:
        return " > ".join(self.headings)
