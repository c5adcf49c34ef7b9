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
    return [c for s in sections for c in chunk_section(s, size=size, overlap=overlap, count=count)]
