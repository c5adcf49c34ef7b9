"""The answer units of the stored passages, embedded after the passages: a fresh index answers before they are done.

An extractive answer judges each quoted passage's sentences, code blocks and table rows (its *units*) by their
vectors. Embedding them is about twice the embedding work of the passages themselves, so ingestion embeds the
passages first (they are searchable as soon as they are written) and the units second, here: in a process of their
own after ``anaphora ingest``, in a thread of ``anaphora serve``, or on demand (``anaphora units``). A turn that
quotes a passage whose units are not embedded yet embeds the ones it needs itself, as answers did before units moved
to ingestion: slower, never wrong (the vectors are the same).

What is done is what the embedder's content-hash cache holds, so a run that stops (Ctrl-C, a crash, a server
stopping) keeps every batch it finished and the next run embeds only what is missing. When a run finds every unit
embedded, it records the corpus generation and the embedder in the corpus (:class:`UnitsMark`), so later runs on an
unchanged corpus skip the scan. One run per data dir at a time (a file lock): a server's thread and the process an
ingestion started do not embed the same units twice.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from anaphora.embeddings.base import CachedEmbedder
from anaphora.types import Chunk

log = logging.getLogger("anaphora.ingest")
SLICE = 256  # passages read and their units embedded per step (a step is what a stop loses at most)
STEP = 128  # units per embedder call: a stop (a server stopping) waits for one call at most
ROUNDS = 3  # scans at most per run while ingestion keeps changing the corpus


class UnitsMark(Protocol):
    """A corpus that lists its passages and keeps the mark of the last complete run."""

    def generation(self) -> int: ...

    def chunk_keys(self) -> list[int]: ...

    def chunks(self, keys: Sequence[int]) -> dict[int, Chunk]: ...

    def answer_units_mark(self) -> str | None: ...

    def set_answer_units_mark(self, mark: str) -> None: ...


@dataclass
class UnitsReport:
    passages: int = 0  # passages whose units were looked at
    units: int = 0  # their distinct units
    embedded: int = 0  # units that were not in the cache and are now
    seconds: float = 0.0
    finished: bool = False  # every unit of the corpus is embedded (False: stopped, or the corpus kept changing)
    busy: bool = False  # another run holds this data dir's lock: nothing was done here


class AnswerUnits:
    """Embeds the answer units of every stored passage into ``embedder``'s cache (where the answerer finds them).
    ``units(text)``: a passage text's units (the answerer's :func:`~anaphora.answering.extractive.judged_texts`)."""

    def __init__(
        self,
        corpus: UnitsMark,
        embedder: CachedEmbedder,
        units: Callable[[str], Sequence[str]],
        lock_path: Path | None = None,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.units = units
        self.lock_path = lock_path

    def _mark(self, generation: int) -> str:
        return f"{self.embedder.name}|{generation}"

    def pending(self) -> bool:
        """Whether some passage's units may be missing (False once a run finished on this corpus generation)."""
        return self.corpus.answer_units_mark() != self._mark(self.corpus.generation())

    def run(
        self,
        progress: Callable[[int, int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> UnitsReport:
        """Embed the missing units; ``progress`` gets (passages done, passages); ``stop`` ends the run between
        steps. Returns at once with ``busy`` when another run has the lock."""
        report = UnitsReport()
        started = time.perf_counter()
        with _exclusive(self.lock_path) as mine:
            if not mine:
                report.busy = True
                return report
            for _ in range(ROUNDS):
                generation = self.corpus.generation()
                if self.corpus.answer_units_mark() == self._mark(generation):
                    report.finished = True
                    break
                if not self._scan(report, progress, stop):
                    break
                if self.corpus.generation() == generation:  # nothing was written meanwhile: all of it is done
                    self.corpus.set_answer_units_mark(self._mark(generation))
                    report.finished = True
                    break
        report.seconds = time.perf_counter() - started
        return report

    def _scan(
        self, report: UnitsReport, progress: Callable[[int, int], None] | None, stop: threading.Event | None
    ) -> bool:
        """One pass over the passages; False when stopped."""
        keys = self.corpus.chunk_keys()
        for done in range(0, len(keys), SLICE):
            if stop is not None and stop.is_set():
                return False
            chunks = self.corpus.chunks(keys[done : done + SLICE]).values()  # a passage removed meanwhile: absent
            texts = list(dict.fromkeys(u for chunk in chunks for u in self.units(chunk.text)))
            missing = sorted(self._missing(texts), key=len)  # steps of similar lengths pad little
            for start in range(0, len(missing), STEP):
                if stop is not None and stop.is_set():
                    return False
                self.embedder.embed(missing[start : start + STEP])  # the cached embedder stores them
                report.embedded += len(missing[start : start + STEP])
            report.passages += len(chunks)
            report.units += len(texts)
            if progress:
                progress(min(done + SLICE, len(keys)), len(keys))
        return True

    def _missing(self, texts: list[str]) -> list[str]:
        known = self.embedder.known(texts)
        return [t for t in texts if t not in known]


@contextmanager
def _exclusive(path: Path | None) -> Iterator[bool]:
    """Hold ``path``'s lock (a file lock, released when the process ends however it ends) if no one else does."""
    if path is None:
        yield True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class UnitsInBackground:
    """Runs :class:`AnswerUnits` in a daemon thread (a server's): :meth:`kick` after a start or an ingestion starts
    a run, or asks the running one to scan again when it ends; :meth:`stop` ends it between steps."""

    def __init__(
        self,
        units: AnswerUnits,
        *,
        on_report: Callable[[UnitsReport], None] | None = None,
        first: Callable[[], None] | None = None,
    ) -> None:
        """``first``: run once in the thread before the first run (a server re-embeds a stale index there)."""
        self.units = units
        self.on_report = on_report
        self.first = first
        self._stop = threading.Event()
        self._again = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def kick(self) -> None:
        with self._lock:
            self._again.set()
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._loop, name="anaphora-answer-units", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        first, self.first = self.first, None
        if first is not None:
            try:
                first()
            except Exception:  # the service answers (or refuses with a hint) as before; the next ingest re-embeds
                log.exception("re-embedding the stored passages failed")
        while True:
            with self._lock:
                if not self._again.is_set() or self._stop.is_set():
                    self._thread = None
                    return
                self._again.clear()
            try:
                report = self.units.run(stop=self._stop)
            except Exception:  # turns embed what they need meanwhile; the next kick tries again
                log.exception("embedding the answer units failed")
                continue
            if self.on_report is not None:
                self.on_report(report)

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the runs asked for so far (tests, benchmarks); False if one is still going."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True
