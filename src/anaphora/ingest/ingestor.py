"""Idempotent ingestion: unchanged files are skipped, changed files replaced, deleted files removed.

A file that cannot be read or parsed is reported and skipped; it never disturbs what is already indexed, because
each document is replaced in one transaction only after it parsed, chunked and embedded successfully.

A chunk's *ahead* texts (the units an extractive answer judges, given by the caller) are embedded at the same time
into the embedder's cache, so the first answer that quotes a passage finds their vectors there instead of embedding
them while the user waits. On the embedded store they are not: the passages come first and are searchable when
written, the units after (:mod:`anaphora.ingest.units`).

An index whose passages another embedder embedded (the same model at another precision, ``embedder_precision``)
is re-embedded at the start of the run, every passage in one transaction, with a notice: never refused, never left
half one and half the other.

Throughput: files are parsed and chunked in a thread running ahead of the embedder (a bounded queue,
:mod:`anaphora.ingest.read_ahead`); the embedder gets windows of chunks from many documents at once (it sorts each
window by length, so its batches pad little), and each window's documents are written in one transaction.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.errors import InputError, PassageIdTakenError
from anaphora.ingest.chunker import chunk_sections
from anaphora.ingest.parsers import SUPPORTED_SUFFIXES, ParsedDocument, ParseLimits, parse_file
from anaphora.ingest.read_ahead import read_ahead
from anaphora.ingest.screening import display_path, screen
from anaphora.settings import IngestSettings
from anaphora.store.protocols import DocumentRegistry, DocumentVersion
from anaphora.store.sqlite_corpus import search_text
from anaphora.types import Chunk

log = logging.getLogger("anaphora.ingest")

# (chunks embedded so far, chunks to embed: those parsed so far); (files read, files found)
Progress = Callable[[int, int], None]
READ_AHEAD_DOCUMENTS = 64  # parsed documents waiting for the embedder, at most
WINDOW_BATCHES = 16  # embedder batches per window: chunks embedded (sorted by length) and written together
WRITE_ATTEMPTS = 3  # a window whose passage ids another process took meanwhile is relabelled and written again


class StoredVectors(Protocol):
    """A registry whose passages can be re-embedded in place (the embedded SQLite corpus)."""

    def embedder(self) -> str | None: ...

    def keys_and_texts(self) -> tuple[np.ndarray, list[str]]: ...

    def replace_vectors(self, keys: Sequence[int], vectors: np.ndarray, embedder: str) -> None: ...


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    ahead_embedded: int = 0  # texts of the written chunks embedded ahead (answer units), new to the cache or not
    reembedded: tuple[str, int] | None = None  # (the embedder that had embedded the index, passages re-embedded)
    seconds: float = 0.0


@dataclass
class _Pending:
    root: str
    source: str
    content_hash: str
    chunks: list[Chunk]
    is_new: bool
    relabel: Callable[[], list[Chunk] | None] | None = None  # the chunks under ids free now (None: none free)


@dataclass
class _Tally:
    """Chunks parsed so far (written by the parsing thread, read for progress)."""

    chunks: int = 0


def _discover(path: Path, report: IngestReport, max_bytes: int) -> tuple[Path, list[Path], bool]:
    """Return (root, files, is_directory). Hidden files and folders are ignored; unsupported files, links that
    lead nowhere or in a loop, pipes, devices and files over ``max_bytes`` are reported as skipped."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError for a link loop
        resolved = path
    if resolved.is_dir():
        return resolved, _files_in(resolved, report, max_bytes), True
    if not path.exists() and not path.is_symlink():
        report.skipped.append((display_path(path), "does not exist"))
        return resolved, [], False
    if (problem := screen(path, max_bytes)) is not None:  # the link itself, not where it leads
        report.skipped.append((display_path(path), problem))
        return resolved.parent, [], False
    return resolved.parent, [resolved], False


def _files_in(folder: Path, report: IngestReport, max_bytes: int) -> list[Path]:
    files: list[Path] = []
    for candidate in sorted(folder.rglob("*")):  # rglob does not descend into linked folders: no loop
        relative = candidate.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if candidate.is_dir() and not candidate.is_symlink():
            continue
        if candidate.suffix.lower() not in SUPPORTED_SUFFIXES and not candidate.is_dir():
            report.skipped.append((display_path(candidate), f"unsupported file type {candidate.suffix or '(none)'}"))
            continue
        if (problem := screen(candidate, max_bytes)) is not None:
            report.skipped.append((display_path(candidate), problem))
        else:
            files.append(candidate)
    return files


def _empty_reason(file: Path, data: bytes) -> str:
    """Why a file that parsed gave no text, in words that say what to look at."""
    suffix = file.suffix.lower()
    if suffix == ".pdf":
        return "no text layer (a scanned or image-only PDF; run OCR on it first)"
    if not data.strip():
        return "empty file"
    if suffix == ".jsonl":
        return "no passages (only blank lines)"
    if suffix in (".md", ".markdown", ".rst", ".html", ".htm"):
        return "no body text (only headings or markup)"
    return "no text found"


class _SiteRoot(str):
    """A site's root URL where :meth:`Ingestor._label` expects a folder: ``name`` is its last path segment."""

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]


# Bumped when parsing or chunking changes the chunks of an unchanged file (a dialect's markup read differently), so
# that an index built by an earlier release is re-chunked at the next ingest instead of keeping the old chunks; the
# embedding cache still holds every chunk text that did not change. 2: a Sphinx code caption's markup goes; 3: a
# project's own directive whose content is code (Click's ``click:example``) stays code.
PARSING = 3


class Ingestor:
    def __init__(
        self,
        corpus: DocumentRegistry,
        embedder: Embedder,
        settings: IngestSettings,
        ahead: Callable[[str], Sequence[str]] | None = None,
        stored: StoredVectors | None = None,
    ) -> None:
        """``ahead``: the texts of a chunk's text to embed ahead (``embedder`` caches them); ``None``: none.
        ``stored``: the registry's passages, re-embedded when another embedder embedded them (``None``: never)."""
        self.corpus = corpus
        self.embedder = embedder
        self.settings = settings
        self.ahead = ahead
        self.stored = stored
        self._limits = ParseLimits(max_pdf_chars=settings.max_pdf_chars, max_pdf_seconds=settings.max_pdf_seconds)

    def _fingerprint(self, data: bytes) -> str:
        """Content hash plus everything that changes the chunks, so a settings change, or an upgrade that parses
        the same file differently (:data:`PARSING`), re-chunks."""
        settings = f"{self.settings.chunk_tokens}|{self.settings.chunk_overlap}"
        recipe = f"{self.embedder.name}|{settings}|parsing {PARSING}".encode()
        return hashlib.sha256(recipe + b"\0" + data).hexdigest()

    def _chunks(self, document: ParsedDocument, source: str, label: str) -> list[Chunk]:
        """Chunks of one document; file chunks get ids ``<label>#<n>``, JSONL passages keep theirs."""
        if document.passages is not None:
            return [
                Chunk(id=pid, heading=title, text=text, source=source, ordinal=n)
                for n, (pid, title, text) in enumerate(document.passages, start=1)
            ]
        pieces = chunk_sections(
            document.sections,
            size=self.settings.chunk_tokens,
            overlap=self.settings.chunk_overlap,
            count=self.embedder.count_tokens,
        )
        return [
            Chunk(id=f"{label}#{n}", heading=p.heading, text=p.text, source=source, ordinal=n)
            for n, p in enumerate(pieces, start=1)
        ]

    def _prepare(
        self,
        root: Path,
        file: Path,
        known: dict[tuple[str, str], str],
        report: IngestReport,
        force: bool,
        claimed: set[str],
    ) -> _Pending | None:
        """Parse and chunk one file; ``claimed`` holds the chunk ids earlier files of this run will write."""
        source = file.relative_to(root).as_posix()
        try:
            data = file.read_bytes()
        except OSError as exc:
            report.skipped.append((display_path(file), f"cannot read: {exc.strerror}"))
            return None
        fingerprint = self._fingerprint(data)
        previous = known.get((str(root), source))
        if previous == fingerprint and not force:
            report.unchanged.append(source)
            return None
        try:
            document = parse_file(file, self._limits, data=data)
        except InputError as exc:
            report.skipped.append((display_path(file), exc.message))
            return None
        except RecursionError:  # nesting deeper than any parser (json, html.parser) follows
            report.skipped.append((display_path(file), "nested too deeply to parse"))
            return None
        report.warnings.extend((display_path(file), w) for w in document.warnings)
        if document.is_empty:
            report.skipped.append((display_path(file), _empty_reason(file, data)))
            return None
        chunks, taken = self._label(document, root, source, claimed)
        if taken:
            example = sorted(taken)[0]
            report.skipped.append(
                (display_path(file), f"passage id {example!r} is already used ({len(taken)} clashing ids)")
            )
            return None
        claimed.update(c.id for c in chunks)

        def relabel() -> list[Chunk] | None:
            again, still_taken = self._label(document, root, source, set())
            return None if still_taken else again

        return _Pending(str(root), source, fingerprint, chunks, is_new=previous is None, relabel=relabel)

    def _label(
        self, document: ParsedDocument, root: Path, source: str, claimed: set[str]
    ) -> tuple[list[Chunk], set[str]]:
        """The document's chunks under ids no other document uses, or the ids that clash. A file named like one in
        another ingested folder gets ids prefixed with its folder's name."""
        for label in (source, f"{root.name}/{source}"):
            chunks = self._chunks(document, source, label)
            ids = [c.id for c in chunks]
            duplicated = {i for i, n in Counter(ids).items() if n > 1}
            taken = duplicated | (claimed & set(ids)) | self.corpus.taken_chunk_ids(ids, str(root), source)
            if not taken or document.passages is not None:
                break
        return chunks, taken

    def run(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = True,
        force: bool = False,
        progress: Progress | None = None,
        reading: Progress | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> IngestReport:
        """Bring the index in line with ``paths``. ``prune`` removes documents whose files are gone from an
        ingested folder; ``force`` re-chunks and re-embeds unchanged files too (after an embedder change).
        ``progress`` gets (chunks embedded, chunks to embed); ``reading`` (files read, files found so far);
        ``notice`` a line to show now (the stored passages are being re-embedded)."""
        started = time.perf_counter()
        report = IngestReport()
        self.reembed_stored(report, progress, notice)
        known = {(d.root, d.source): d.content_hash for d in self.corpus.documents()}
        found: list[tuple[Path, Path]] = []
        pruned_roots: list[str] = []
        for raw in paths:
            root, files, is_directory = _discover(
                Path(raw).expanduser().absolute(), report, self.settings.max_file_bytes
            )
            if is_directory:
                pruned_roots.append(str(root))
                if not files:
                    report.warnings.append((str(root), "no supported files found"))
            found.extend((root, file) for file in files)
        seen = {(str(root), file.relative_to(root).as_posix()) for root, file in found}

        tally = _Tally()
        prepared = read_ahead(self._prepare_all(found, known, report, force, tally, reading), READ_AHEAD_DOCUMENTS)
        for window in self._windows(prepared):
            self._write(window, report)
            if progress:
                progress(report.chunks_written, tally.chunks)

        if prune:
            gone = [key for key in known if key[0] in pruned_roots and key not in seen]
            self.corpus.remove_documents(gone)
            report.removed.extend(source for _, source in gone)
        report.seconds = time.perf_counter() - started
        return report

    def needs_reembedding(self) -> bool:
        """Whether the stored passages were embedded by another embedder than this one (and can be re-embedded)."""
        before = self.stored.embedder() if self.stored is not None else None
        return before is not None and before != self.embedder.name

    def reembed_stored(
        self,
        report: IngestReport | None = None,
        progress: Progress | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        """Every stored passage embedded again when another embedder embedded them, written in one transaction.
        Stopped half way, nothing is written (the vectors made so far are in the embedder's cache, so the next run
        goes faster)."""
        before = self.stored.embedder() if self.stored is not None else None
        if self.stored is None or before is None or before == self.embedder.name:
            return
        keys, texts = self.stored.keys_and_texts()
        if not texts:
            return
        line = f"the index was embedded by {before}; re-embedding its {len(texts)} passages with {self.embedder.name}"
        log.warning(line)
        if notice:
            notice(line)
        size = max(1, self.settings.embed_batch_size * WINDOW_BATCHES)
        parts = []
        for start in range(0, len(texts), size):
            parts.append(self.embedder.embed(texts[start : start + size]))
            if progress:
                progress(start + len(parts[-1]), len(texts))
        self.stored.replace_vectors([int(k) for k in keys], np.concatenate(parts), self.embedder.name)
        if report is not None:
            report.reembedded = (before, len(texts))

    def _prepare_all(
        self,
        found: list[tuple[Path, Path]],
        known: dict[tuple[str, str], str],
        report: IngestReport,
        force: bool,
        tally: _Tally,
        reading: Progress | None,
    ) -> Iterator[_Pending]:
        """Parse and chunk the files in order (this runs in the read-ahead thread, and so does ``reading``)."""
        claimed: set[str] = set()
        for read, (root, file) in enumerate(found, start=1):
            item = self._prepare(root, file, known, report, force, claimed)
            if item:
                tally.chunks += len(item.chunks)
            if reading:
                reading(read, len(found))
            if item:
                yield item

    def _windows(self, prepared: Iterable[_Pending]) -> Iterator[list[_Pending]]:
        """Whole documents grouped until a window holds ``WINDOW_BATCHES`` embedder batches of chunks. The first
        windows are smaller (one batch, then twice as many each time), so the embedder starts as soon as the parser
        has one batch instead of idling until it has a full window."""
        batch = max(1, self.settings.embed_batch_size)
        size, largest = batch, batch * WINDOW_BATCHES
        window: list[_Pending] = []
        chunks = 0
        for item in prepared:
            window.append(item)
            chunks += len(item.chunks)
            if chunks >= size:
                yield window
                window, chunks = [], 0
                size = min(largest, size * 2)
        if window:
            yield window

    def _write(self, window: list[_Pending], report: IngestReport) -> None:
        """Embed a window's chunks in one call and write its documents in one transaction. Passage ids taken by
        another process since they were chosen (two ingestions into one PostgreSQL) are chosen again."""
        vectors = self._embed([c for item in window for c in item.chunks])
        if self.ahead is not None:
            ahead = dict.fromkeys(t for item in window for c in item.chunks for t in self.ahead(c.text))
            self.embedder.embed(list(ahead))  # into the cache; a text met before costs a lookup
            report.ahead_embedded += len(ahead)
        offsets = np.cumsum([0, *(len(item.chunks) for item in window)])
        versions = {
            id(item): DocumentVersion(item.root, item.source, item.content_hash, item.chunks, vectors[a:b])
            for item, a, b in zip(window, offsets[:-1], offsets[1:], strict=True)
        }
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self.corpus.replace_documents([versions[id(item)] for item in window], self.embedder.name)
                break
            except PassageIdTakenError:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                window = self._relabel(window, versions, report)
        for item in window:
            report.chunks_written += len(item.chunks)
            (report.added if item.is_new else report.updated).append(item.source)

    @staticmethod
    def _relabel(window: list[_Pending], versions: dict[int, DocumentVersion], report: IngestReport) -> list[_Pending]:
        """The window's documents under ids free now (their vectors kept); one with none free is skipped."""
        kept = []
        for item in window:
            chunks = item.relabel() if item.relabel else None
            if chunks is None:
                report.skipped.append((item.source, "its passage ids were taken by another ingestion meanwhile"))
                continue
            item.chunks = chunks
            versions[id(item)] = versions[id(item)]._replace(chunks=chunks)
            kept.append(item)
        return kept

    def _embed(self, chunks: list[Chunk]) -> np.ndarray:
        if not chunks:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        return self.embedder.embed([search_text(c.heading, c.text) for c in chunks])

    def write_parsed(
        self,
        root: str,
        documents: Iterable[tuple[str, str, ParsedDocument]],
        report: IngestReport,
        *,
        force: bool = False,
    ) -> None:
        """Write documents parsed elsewhere (``(source, content hash, document)``: the pages of a crawled site)
        under ``root``, chunked, labelled, embedded and written as files are; an unchanged hash writes nothing."""
        known = {(d.root, d.source): d.content_hash for d in self.corpus.documents() if d.root == root}
        claimed: set[str] = set()

        def prepared() -> Iterator[_Pending]:
            for source, content_hash, document in documents:
                fingerprint = self._fingerprint(content_hash.encode())
                previous = known.get((root, source))
                if previous == fingerprint and not force:
                    report.unchanged.append(source)
                    continue
                chunks, taken = self._label(document, _SiteRoot(root), source, claimed)  # type: ignore[arg-type]
                if taken:
                    report.skipped.append((source, f"passage id {sorted(taken)[0]!r} is already used"))
                    continue
                claimed.update(c.id for c in chunks)
                yield _Pending(root, source, fingerprint, chunks, is_new=previous is None)

        for window in self._windows(prepared()):
            self._write(window, report)
