"""Token-aware chunking with overlap that keeps each chunk inside one section (so its heading path holds)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from anaphora.ingest.parsers import Section

TokenCounter = Callable[[str], int]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


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
            units.extend(s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip())
    return units


def _split_long(unit: str, limit: int, count: TokenCounter) -> list[str]:
    """Cut an over-long unit at line, then word, boundaries."""
    pieces: list[str] = []
    current: list[str] = []
    separator = "\n" if "\n" in unit else " "
    for part in unit.split(separator):
        candidate = separator.join([*current, part])
        if current and count(candidate) > limit:
            pieces.append(separator.join(current))
            current = [part]
        else:
            current.append(part)
    if current:
        pieces.append(separator.join(current))
    if separator == "\n":
        return [p for piece in pieces for p in (_split_long(piece, limit, count) if count(piece) > limit else [piece])]
    return pieces


def chunk_section(section: Section, *, size: int, overlap: int, count: TokenCounter) -> list[TextChunk]:
    units: list[tuple[str, int]] = []
    for unit in _units(section.text):
        n = count(unit)
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
    if window:
        text = "\n".join(u for u, _ in window)
        if not chunks or text not in chunks[-1].text:
            chunks.append(TextChunk(section.heading, text, sum(t for _, t in window)))
    return chunks


def chunk_sections(sections: list[Section], *, size: int, overlap: int, count: TokenCounter) -> list[TextChunk]:
    return [c for s in sections for c in chunk_section(s, size=size, overlap=overlap, count=count)]
