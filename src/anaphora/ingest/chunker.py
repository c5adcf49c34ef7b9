"""Token-aware chunking with overlap that keeps each chunk inside one section (so its heading path holds)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from anaphora.ingest.sections import Block, Section
from anaphora.text import sentences

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class TextChunk:
    heading: str
    text: str
    tokens: int


def _units(text: str) -> list[str]:
    """Paragraphs, then sentences; code blocks and lists stay whole paragraphs unless they are too long."""
    units: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if paragraph.startswith(("```", "~~~", "    ", "- ", "* ", "1.", "|")):
            units.append(paragraph)
        else:
            units.extend(s.strip() for s in sentences(paragraph) if s.strip())
    return units


# A unit longer than this many characters per token of the chunk size is split before it is counted: a tokenizer
# asked to count a 10 MB paragraph at once holds every token of it (gigabytes), and is not needed to know it is long.
MAX_CHARS_PER_TOKEN = 32
# no tokenizer turns one character into more than four tokens (byte-level BPE of a 4-byte UTF-8 character)
MAX_TOKENS_PER_CHAR = 4


def _split_long(unit: str, limit: int, count: TokenCounter) -> list[str]:
    """Cut an over-long unit at line, then word, boundaries (a word longer than a chunk: at characters).

    Linear in time and bounded in memory: the unit is read one window of ``limit * MAX_CHARS_PER_TOKEN``
    characters at a time (never split into a list of all its words: 17 million strings for 100 MB), and each
    piece is found by a galloping search that starts from the previous piece's length, so the tokenizer sees
    every character about three times, not once per word of the piece."""
    separator = "\n" if "\n" in unit else " "
    window_chars = limit * MAX_CHARS_PER_TOKEN
    pieces: list[str] = []
    position, guess = 0, 1
    while position < len(unit):
        window = unit[position : position + window_chars + 1]
        parts = window.split(separator)
        if position + len(window) < len(unit) and len(parts) > 1:
            parts.pop()  # the window may end inside this part
        taken = _parts_that_fit(parts, 0, separator, limit, count, guess)
        if taken == 0:  # one part alone is over the limit
            end = unit.find(separator, position)
            end = len(unit) if end < 0 else end
            part = unit[position:end]
            if separator == "\n":
                pieces.extend(_split_long(part, limit, count))
            else:
                step = max(1, limit // MAX_TOKENS_PER_CHAR)
                pieces.extend(part[i : i + step] for i in range(0, len(part), step))
            position = end + 1
            continue
        piece = separator.join(parts[:taken])
        pieces.append(piece)
        position, guess = position + len(piece) + 1, taken
    return [p for p in pieces if p]


def _parts_that_fit(parts: list[str], start: int, separator: str, limit: int, count: TokenCounter, guess: int) -> int:
    """The most parts from ``start`` on whose join has at most ``limit`` tokens (0 if not even one fits), searched
    from ``guess``: up or down by 1, 2, 4, ... parts until the answer is bracketed, then by bisection."""

    def fits(n: int) -> bool:
        text = separator.join(parts[start : start + n])
        return len(text) <= limit * MAX_CHARS_PER_TOKEN and count(text) <= limit

    available = len(parts) - start
    n = min(max(guess, 1), available)
    step = 1
    if fits(n):
        good, bad = n, available + 1  # bad: the smallest count known not to fit (past the end: none)
        while good < available:
            trial = min(good + step, available)
            if not fits(trial):
                bad = trial
                break
            good, step = trial, step * 2
    else:
        good, bad = 0, n
        while bad - step >= 1:
            trial = bad - step
            if fits(trial):
                good = trial
                break
            bad, step = trial, step * 2
    while bad - good > 1:  # bisect between the last fit and the first misfit
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def chunk_section(section: Section, *, size: int, overlap: int, count: TokenCounter) -> list[TextChunk]:
    units: list[tuple[str, int]] = []
    for unit in _units(section.text):
        n = count(unit) if len(unit) <= size * MAX_CHARS_PER_TOKEN else size + 1  # too long to count whole
        if n > size:
            units.extend((piece, count(piece)) for piece in _split_long(unit, size, count))
        else:
            units.append((unit, n))
    chunks: list[TextChunk] = []
    window: list[tuple[str, int]] = []
    for unit, n in units:
        if window and sum(t for _, t in window) + n > size:
            chunks.append(TextChunk(section.heading, "\n".join(u for u, _ in window), sum(t for _, t in window)))
            kept: list[tuple[str, int]] = []
            for previous in reversed(window):  # carry trailing units up to `overlap` tokens...
                if sum(t for _, t in kept) + previous[1] > overlap:
                    break
                kept.insert(0, previous)
            while kept and sum(t for _, t in kept) + n > size:  # ...as long as the next unit still fits
                kept.pop(0)
            window = kept
        window.append((unit, n))
    if window:  # it holds at least the last unit, which no chunk has yet (repetitive text can look contained)
        chunks.append(TextChunk(section.heading, "\n".join(u for u, _ in window), sum(t for _, t in window)))
    return chunks


def chunk_sections(sections: list[Section], *, size: int, overlap: int, count: TokenCounter) -> list[TextChunk]:
    """Sections with typed blocks (Markdown) are merged while small and packed by block; others by paragraph."""
    if sections and all(s.blocks for s in sections):
        return [
            c
            for s in merge_small_sections(sections, size=size, count=count)
            for c in pack_blocks(s.heading, s.blocks, size=size, overlap=overlap, count=count)
        ]
    return [c for s in sections for c in chunk_section(s, size=size, overlap=overlap, count=count)]


# --- Markdown sections with typed blocks ---------------------------------------------------------------------------
# A sentence that introduces what follows it: a chunk never ends on one.
LEAD_IN = re.compile(r"(?::|\bthe following\b[^.!?]*|\bas follows\b[^.!?]*)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Unit:
    """A piece the packer never cuts. Units of one block (``group``) join with ``joiner`` (sentences of a paragraph
    with a space, rows, items and code pieces with a newline); units of different blocks with a blank line."""

    text: str
    tokens: int
    group: int
    joiner: str = "\n"
    lead_in: bool = False  # introduces the next unit (a lead-in sentence, a label, a heading, a table header)
    follows: bool = False  # belongs with the unit before it (a code block after the sentence that introduces it)
    header: str = ""  # a table row's header rows (a code or list piece's introducing sentence), repeated when a
    header_tokens: int = 0  # chunk starts inside the table (the block)
    header_joiner: str = "\n"
    header_group: int | None = None  # the group of the unit the header repeats (the sentence before a block)
    is_header: bool = False


def _bound(first: _Unit, second: _Unit) -> bool:
    return first.lead_in or second.follows


def _headed(window: list[_Unit]) -> set[int]:
    """The groups whose header the window holds already: a table's header row, the sentence that introduces a code
    block or list."""
    groups = {u.group for u in window}
    return {u.group for u in window if u.is_header or (u.header_group is not None and u.header_group in groups)}


def _cost(window: list[_Unit]) -> int:
    """Tokens of the window as a chunk: its units, plus the header of each table (introduced code block or list)
    whose rows (pieces) it holds without it."""
    total = sum(u.tokens for u in window)
    headed = _headed(window)
    missing = {u.group: u.header_tokens for u in window if u.header and u.group not in headed}
    return total + sum(missing.values())


def _render(window: list[_Unit]) -> str:
    parts: list[str] = []
    headed = _headed(window)
    previous: _Unit | None = None
    for unit in window:
        text = unit.text
        if unit.header and unit.group not in headed:  # a chunk that starts inside a table or block repeats its head
            text = f"{unit.header}{unit.header_joiner}{text}"
            headed.add(unit.group)
        if previous is not None:
            parts.append(unit.joiner if previous.group == unit.group else "\n\n")
        parts.append(text)
        previous = unit
    return "".join(parts)


def _pieces(text: str, limit: int, count: TokenCounter) -> list[tuple[str, int]]:
    """``text`` whole when it fits ``limit``, else cut at line or word boundaries (:func:`_split_long`)."""
    n = count(text) if len(text) <= limit * MAX_CHARS_PER_TOKEN else limit + 1
    if n <= limit:
        return [(text, n)]
    return [(p, count(p)) for p in _split_long(text, max(1, limit), count)]


def _under(intro: _Unit | None) -> dict:
    """The header fields of a piece of a block that ``intro`` (the sentence before it) introduces: a chunk that
    starts inside a long code block or list repeats that sentence, as a table's pieces repeat its header row."""
    if intro is None:
        return {}
    return {"header": intro.text, "header_tokens": intro.tokens, "header_joiner": "\n\n", "header_group": intro.group}


def _block_units(blocks: list[Block], size: int, count: TokenCounter) -> list[_Unit]:
    units: list[_Unit] = []
    for group, block in enumerate(blocks):
        intro = units[-1] if units and units[-1].lead_in else None  # the sentence that introduces the block
        if block.kind == "table":
            head_tokens = count(block.head)
            header = _Unit(block.head, head_tokens, group, lead_in=True, is_header=True)
            headed = not block.parts  # the header goes before the first row quoted under it, never alone
            if headed:
                units.append(header)
            for row, record in zip(block.parts, block.records, strict=True):
                n = count(row) if len(row) <= size * MAX_CHARS_PER_TOKEN else size + 1
                if n + head_tokens <= size:
                    if not headed:
                        units.append(header)
                        headed = True
                    units.append(_Unit(row, n, group, header=block.head, header_tokens=head_tokens))
                else:  # a row longer than a chunk: read as "column: value" lines, cut where they must be
                    units.extend(_Unit(p, m, group) for p, m in _pieces(record, size, count))
        elif block.kind == "code":
            fence_tokens = count(f"{block.head}\n```")
            room = size - fence_tokens - (intro.tokens if intro else 0)
            pieces = _pieces("\n".join(block.parts), max(1, room), count)
            for number, (piece, n) in enumerate(pieces):
                text = f"{block.head}\n{piece}\n```"
                units.append(_Unit(text, n + fence_tokens, group, follows=number == 0 and bool(units), **_under(intro)))
        elif block.kind == "list":
            room = max(1, size - (intro.tokens if intro else 0))
            for item in block.parts:
                units.extend(_Unit(piece, n, group, **_under(intro)) for piece, n in _pieces(item, room, count))
        elif block.kind in ("label", "heading"):
            units.append(_Unit(block.text, count(block.text), group, lead_in=True))
        else:
            pieces = _pieces(block.text, size, count)
            if len(pieces) > 1:  # a long paragraph: by sentence, then by word
                parts = [s.strip() for s in sentences(block.text) if s.strip()]
                pieces = [p for s in parts for p in _pieces(s, size, count)]
            for number, (piece, n) in enumerate(pieces):
                lead = number == len(pieces) - 1 and bool(LEAD_IN.search(piece))
                units.append(_Unit(piece, n, group, joiner=" ", lead_in=lead))
    return units


def _carry(window: list[_Unit], overlap: int, following: _Unit, size: int) -> list[_Unit]:
    """The trailing units of a full window, up to ``overlap`` tokens, that still leave room for ``following``."""
    kept: list[_Unit] = []
    for previous in reversed(window):
        if sum(u.tokens for u in kept) + previous.tokens > overlap:
            break
        kept.insert(0, previous)
    while kept and _cost([*kept, following]) > size:
        kept.pop(0)
    return kept


def pack_blocks(heading: str, blocks: list[Block], *, size: int, overlap: int, count: TokenCounter) -> list[TextChunk]:
    """Chunks of typed blocks: up to ``size`` tokens, never ending on a lead-in, a code block with the sentence
    before it, every piece of a table under its header rows."""
    chunks: list[TextChunk] = []
    window: list[_Unit] = []
    for unit in _block_units(blocks, size, count):
        if window and _cost([*window, unit]) > size:
            cut = len(window)
            while cut > 0 and _bound(window[cut - 1], window[cut] if cut < len(window) else unit):
                cut -= 1
            if cut == 0 or _cost([*window[cut:], unit]) > size:
                cut = len(window)  # they cannot stay together in any chunk: cut where the size says
            chunks.append(TextChunk(heading, _render(window[:cut]), _cost(window[:cut])))
            window = window[cut:] if cut < len(window) else _carry(window, overlap, unit, size)
        window.append(unit)
    if window:
        chunks.append(TextChunk(heading, _render(window), _cost(window)))
    return chunks


def _common(a: list[str], b: list[str]) -> list[str]:
    common = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common.append(x)
    return common


def merge_small_sections(sections: list[Section], *, size: int, count: TokenCounter) -> list[Section]:
    """Neighbouring sections of one parent (siblings, or a section and its first children) merged while together
    they fit ``size`` tokens: a three-line section is not a chunk of its own. The merged section is headed by
    their common heading path; each member's own heading stays in it as a heading block."""
    merged: list[tuple[list[str], list[tuple[Section, int]]]] = []
    for section in sections:
        tokens = count(section.text) + count(section.heading)
        if merged:
            base, members = merged[-1]
            common = _common(base, section.headings)
            related = len(common) >= max(1, len(section.headings) - 1) and len(common) >= len(base) - 1
            if related and sum(n for _, n in members) + tokens <= size:
                merged[-1] = (common, [*members, (section, tokens)])
                continue
        merged.append((list(section.headings), [(section, tokens)]))
    result = []
    for base, members in merged:
        if len(members) == 1:
            result.append(members[0][0])
            continue
        blocks: list[Block] = []
        for section, _ in members:
            own = section.headings[len(base) :]
            if own:
                blocks.append(Block("heading", " > ".join(own)))
            blocks.extend(section.blocks)
        result.append(Section(base, "\n\n".join(b.text for b in blocks), blocks))
    return result
