"""File parsers: each turns one file into sections (heading path + text), or pre-chunked passages for JSONL."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from anaphora.errors import InputError
from anaphora.ingest.markdown import parse_markdown_page
from anaphora.ingest.rst import looks_like_rst, parse_rst
from anaphora.ingest.sections import Section
from anaphora.text_policy import describe_invalid

SUPPORTED_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".html", ".htm", ".pdf", ".jsonl")


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Bounds on what one file may expand into (the settings max_pdf_chars and max_pdf_seconds)."""

    max_pdf_chars: int = 20_000_000
    max_pdf_seconds: float = 60.0


# text that is mostly not text: C0 controls other than whitespace, DEL, C1 controls, and U+FFFD from failed decoding
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
BINARY_SAMPLE_CHARS = 65536
BINARY_SHARE = 0.05


def binary_problem(text: str) -> str | None:
    """Why decoded ``text`` looks like binary content (a NUL, or over 5% control or replacement characters in its
    first 64k characters), or None when it reads as text."""
    sample = text[:BINARY_SAMPLE_CHARS]
    if "\x00" in sample:
        return "binary content (NUL bytes), not a text file"
    odd = len(_NOT_TEXT.findall(sample))
    if sample and odd > BINARY_SHARE * len(sample):
        return f"binary content ({odd / len(sample):.0%} control or undecodable characters), not a text file"
    return None


@dataclass(slots=True)
class ParsedDocument:
    sections: list[Section] = field(default_factory=list)
    passages: list[tuple[str, str, str]] | None = None  # (id, heading, text) when the file is already chunked
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, object] = field(default_factory=dict)  # Markdown front matter: title, description, ...

    @property
    def is_empty(self) -> bool:
        if self.passages is not None:
            return not self.passages
        return not any(s.text.strip() for s in self.sections)


def decode(data: bytes) -> tuple[str, str | None]:
    """UTF-8 (with or without BOM) first; otherwise Windows-1252, which never fails, with a warning."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), "not valid UTF-8; decoded as Windows-1252"


def parse_html(text: str) -> list[Section]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "nav", "footer", "noscript"]):
        tag.decompose()
    body = soup.body or soup
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    buffer: list[str] = []

    def flush() -> None:
        joined = "\n\n".join(b for b in buffer if b).strip()
        if joined:
            sections.append(Section([h for _, h in path], joined))
        buffer.clear()

    for element in body.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "dd", "dt"]):
        if element.name[0] == "h" and element.name[1:].isdigit():
            flush()
            level = int(element.name[1])
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, element.get_text(" ", strip=True))]
        elif not element.find_parent(["li", "pre", "td", "dd"]) or element.name == "pre":
            buffer.append(element.get_text(" ", strip=True) if element.name != "pre" else element.get_text())
    flush()
    if not sections:
        plain = body.get_text("\n", strip=True)
        if plain:
            sections.append(Section([], plain))
    return sections


def parse_pdf(path: Path, limits: ParseLimits = ParseLimits()) -> list[Section]:
    """Text per page, within the limits: a PDF whose compressed streams expand past ``max_pdf_chars`` (content
    streams or extracted text) or whose extraction runs past ``max_pdf_seconds`` is refused, not ground through."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    started = time.monotonic()
    pages: list[str] = []
    expanded = 0
    try:
        reader = PdfReader(str(path))
        for number, page in enumerate(reader.pages, start=1):
            contents = page.get_contents()
            expanded += len(contents.get_data()) if contents is not None else 0
            if expanded > limits.max_pdf_chars:
                raise _pdf_too_big(
                    path, f"its page streams expand past {limits.max_pdf_chars:,} bytes by page {number}"
                )
            pages.append(page.extract_text() or "")
            if sum(map(len, pages)) > limits.max_pdf_chars:
                raise _pdf_too_big(path, f"its text passes {limits.max_pdf_chars:,} characters by page {number}")
            if time.monotonic() - started > limits.max_pdf_seconds:
                raise _pdf_too_big(path, f"extracting its text took over {limits.max_pdf_seconds:g} s by page {number}")
    except LimitReachedError as exc:  # pypdf's own bound on what a stream may decompress to
        raise _pdf_too_big(path, f"a compressed stream expands past pypdf's limit ({exc})") from exc
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:  # PyPdfError: PdfReadError and the rest
        raise InputError(f"{path.name}: not a readable PDF ({exc})", hint="re-export the PDF or remove it") from exc
    return [Section([f"page {n}"], text.strip()) for n, text in enumerate(pages, start=1) if text.strip()]


def _pdf_too_big(path: Path, why: str) -> InputError:
    return InputError(
        f"{path.name}: too large to ingest: {why}",
        hint="raise max_pdf_chars / max_pdf_seconds if the PDF is trusted, or split it",
    )


def parse_jsonl(text: str, name: str) -> list[tuple[str, str, str]]:
    """A passage corpus: one ``{"id", "text"[, "title"]}`` object per line, kept as given (no re-chunking)."""
    passages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            passage = (str(record["id"]), str(record.get("title") or ""), str(record["text"]))
        except RecursionError as exc:
            raise InputError(
                f"{name}, line {number}: nested too deeply to parse", hint="a passage record is a flat JSON object"
            ) from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{name}, line {number}: not a passage record ({exc})",
                hint='each line must be a JSON object with "id" and "text"',
            ) from exc
        if (problem := describe_invalid("".join(passage))) is not None:
            raise InputError(f"{name}, line {number}: {problem}", hint="store the passage as valid Unicode text")
        passages.append(passage)
    return passages


_HTML_TAG = re.compile(r"<[A-Za-z!/]")


def _is_rst(suffix: str, text: str) -> bool:
    """``.rst``, or a ``.txt`` (``.html`` without a tag) written in reStructuredText: Sphinx trees include .txt
    pages, Django's docs are all .txt, and a built site leaves "Moved" stubs under .html names."""
    if suffix == ".rst":
        return True
    if suffix == ".txt" or (suffix in (".html", ".htm") and not _HTML_TAG.search(text)):
        return looks_like_rst(text)
    return False


def parse_file(path: Path, limits: ParseLimits = ParseLimits(), *, data: bytes | None = None) -> ParsedDocument:
    """Parse by suffix (``data``: the file's bytes, when the caller has read them already). Raises
    :class:`InputError` for unsupported, unreadable, binary or corrupt files, and for PDFs past ``limits``."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputError(
            f"{path.name}: unsupported file type {suffix or '(none)'}",
            hint=f"supported: {', '.join(SUPPORTED_SUFFIXES)}",
        )
    if suffix == ".pdf":
        return ParsedDocument(sections=parse_pdf(path, limits))
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})", hint="check the file permissions") from exc
    text, warning = decode(data)
    if (problem := binary_problem(text)) is not None:
        raise InputError(problem, hint=f"only text files are ingested as {suffix}")
    document = ParsedDocument(warnings=[warning] if warning else [])
    if suffix == ".jsonl":
        document.passages = parse_jsonl(text, path.name)
    elif _is_rst(suffix, text):
        document.sections = parse_rst(text, path.name)
    elif suffix in (".html", ".htm"):
        document.sections = parse_html(text)
    elif suffix == ".txt":
        document.sections = [Section([], text.strip())] if text.strip() else []
    else:
        page = parse_markdown_page(text)
        document.sections, document.metadata = page.sections, page.metadata
        document.warnings.extend(page.warnings)
    return document
