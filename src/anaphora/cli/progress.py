"""Ingestion progress for the CLI: a Rich bar on a terminal; elsewhere (a pipe, a file, a CI log) one plain line on
stderr every few seconds, so a long run is never silent until its end.

The ingestor reports two counts through its callbacks: files read (of the files found so far) and chunks embedded
(of the chunks to embed). Rate and ETA are computed here from the chunk count. Ingestion has two phases, and the
bar and the lines name the one that runs: the passages (searchable as they are written), then the answer units
(:mod:`anaphora.ingest.units`), counted by the passages whose units are done."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

DEFAULT_EVERY_S = 5.0


def duration(seconds: float) -> str:
    """``52 s``, ``3 min 10 s``, ``1 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class IngestProgress:
    """Context manager; pass :attr:`files` and :attr:`chunks` to ``Anaphora.ingest``."""

    def __init__(
        self,
        console: Console,
        *,
        every_s: float = DEFAULT_EVERY_S,
        label: str = "ingest",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``label`` starts every line; "answer units" counts passages whose units are done, else chunks."""
        self.console = console
        self.every_s = every_s
        self.label = label
        self.counted = "passages done" if label == "answer units" else "chunks embedded"
        self.task = "embedding answer units" if label == "answer units" else "embedding passages"
        self.clock = clock
        self.files_read = self.files_found = self.chunks_done = self.chunks_total = 0
        self._started = self._embedding_since = self._last_line = 0.0
        self._bar: Progress | None = None
        self._reading: TaskID | None = None
        self._embedding: TaskID | None = None

    def __enter__(self) -> IngestProgress:
        self._started = self._last_line = self.clock()
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._reading = self._bar.add_task("reading files", total=None, rate="")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, error, traceback)

    def files(self, read: int, found: int) -> None:
        self.files_read, self.files_found = read, found
        if self._bar is not None and self._reading is not None:
            self._bar.update(self._reading, completed=read, total=found)
        self._maybe_line()

    def chunks(self, done: int, total: int) -> None:
        if not self._embedding_since:  # chunks come a window at a time: a first report past 0 counts from the start
            self._embedding_since = self.clock() if done == 0 else self._started
        self.chunks_done, self.chunks_total = done, total
        if self._bar is not None:
            if self._embedding is None:
                self._embedding = self._bar.add_task(self.task, total=total, rate="")
            self._bar.update(self._embedding, completed=done, total=total, rate=self._rate_text())
        self._maybe_line()

    units = chunks  # the answer-units phase reports (passages done, passages)

    def notice(self, line: str) -> None:
        """A line to show at once, above the bar (the index is re-embedded for another embedder)."""
        (self._bar.console if self._bar is not None else self.console).print(line, markup=False, highlight=False)

    def rate(self) -> float | None:
        """Chunks embedded per second since embedding began, None before there is anything to measure."""
        elapsed = self.clock() - self._embedding_since if self._embedding_since else 0.0
        return self.chunks_done / elapsed if elapsed > 0 and self.chunks_done > 0 else None

    def _rate_text(self) -> str:
        rate = self.rate()
        return "" if rate is None else f"{rate:,.1f} {self.counted.split()[0]}/s"

    def line(self) -> str:
        """The plain progress line: files, chunks, rate, ETA."""
        parts = [] if self.label == "answer units" else [f"{self.files_read:,}/{self.files_found:,} files read"]
        if self.chunks_total:
            parts.append(f"{self.chunks_done:,}/{self.chunks_total:,} {self.counted}")
            rate = self.rate()
            if rate is not None:
                parts.append(self._rate_text())
                parts.append(f"ETA {duration((self.chunks_total - self.chunks_done) / rate)}")
        parts.append(f"{duration(self.clock() - self._started)} so far")
        return f"{self.label}: " + ", ".join(parts)

    def _maybe_line(self) -> None:
        if self._bar is not None:
            return
        now = self.clock()
        if now - self._last_line >= self.every_s:
            self._last_line = now
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)
            self.console.file.flush()
