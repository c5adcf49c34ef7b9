"""The search indexes derived from the chunk table, cached on disk, rebuilt off the request path when the corpus
changed.

SQLite is the truth; ``bm25/`` and ``dense/`` under ``<data_dir>/index`` are caches stamped with the corpus
generation they were built from. A stale, missing or unreadable cache is rebuilt, so a crash between a
corpus write and an index save costs a rebuild, never a wrong answer.

A rebuild of a large corpus takes seconds to minutes (about 20 s for 37k passages on two idle cores), so turns never
wait for one: :meth:`IndexCache.get` serves the generation it has and, when the corpus moved on, starts building
the next one in a background thread; the new generation replaces the old in one assignment when it is complete.
Only the very first use (nothing built yet) and :meth:`IndexCache.refresh` (called by ingestion, which wants what
it wrote searchable when it reports done) build in the caller's thread. A large corpus is built by a child process
at low CPU priority (:mod:`anaphora.retrieval.rebuild`), so a rebuild holds neither the service's GIL nor its
cores. Passage keys are never reused (see :class:`~anaphora.store.sqlite_corpus.SQLiteCorpus`), so a key an older
generation returns names the same passage or none.

Reading the generation is a query on the shared SQLite connection, which under load queues behind the turns being
stored; so it is read at most every ``recheck_s`` seconds, and at once after a change made in this process. A
change made by another process (``anaphora ingest`` beside a running service) shows within ``recheck_s`` plus the
time of the rebuild.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from anaphora.errors import ConfigurationError
from anaphora.retrieval.bm25 import BM25Index
from anaphora.retrieval.dense import EXACT_BELOW, DenseIndex
from anaphora.retrieval.rebuild import CHILD_FROM, BuildSpec, build_in_child
from anaphora.store.protocols import embedder_mismatch
from anaphora.store.sqlite_corpus import SQLiteCorpus

log = logging.getLogger("anaphora.retrieval")


@dataclass(frozen=True)
class SearchIndexes:
    generation: int
    bm25: BM25Index
    dense: DenseIndex


class IndexCache:
    def __init__(
        self,
        corpus: SQLiteCorpus,
        directory: Path,
        embedder_name: str,
        dim: int | Callable[[], int],
        *,
        recheck_s: float = 1.0,
        exact_below: int = EXACT_BELOW,
        child_from: int | None = CHILD_FROM,
    ) -> None:
        """``dim`` may be a callable, so that the embedder is loaded only when an index is first needed.
        ``exact_below``: corpora with fewer passages are searched by an exact scan, larger ones by HNSW.
        ``child_from``: corpora of this many passages or more are built by a child process
        (:mod:`anaphora.retrieval.rebuild`); None: always in this process."""
        self.corpus = corpus
        self.child_from = child_from
        self.exact_below = exact_below
        self.directory = directory
        self.embedder_name = embedder_name
        self.recheck_s = recheck_s
        self._dim = dim
        self._current: SearchIndexes | None = None
        self._checked: tuple[float, int] = (float("-inf"), -1)  # (when, corpus.local_writes) of the last check
        self.seen_generation = -1  # the newest corpus generation observed (may be ahead of the one served)
        self._build_lock = threading.Lock()  # one build at a time, whoever asked for it
        self._rebuilding: threading.Thread | None = None
        self._failure: ConfigurationError | None = None  # what the last background build refused to build

    @property
    def dim(self) -> int:
        if callable(self._dim):
            self._dim = self._dim()
        return self._dim

    def get(self) -> SearchIndexes:
        """The newest built generation. Never waits for a rebuild once one generation is built: a stale one is
        served while the next is built in the background."""
        current = self._current
        if current is None:
            return self.refresh()
        checked_at, writes_seen = self._checked
        now = time.monotonic()
        if writes_seen != self.corpus.local_writes or now - checked_at >= self.recheck_s:
            self._checked = (now, self.corpus.local_writes)
            self.seen_generation = self.corpus.generation()
            if self.seen_generation != current.generation or self._failure is not None:
                self._rebuild_in_background()  # a failed one is tried again: the corpus may be fixed meanwhile
        if self._failure is not None:
            raise self._failure
        return current

    def refresh(self) -> SearchIndexes:
        """Bring the indexes to the corpus's current generation now, in the caller's thread (an ingestion that
        wants its writes searchable when it reports done); turns keep using the previous generation meanwhile."""
        with self._build_lock:
            generation = self.corpus.generation()
            self.seen_generation = max(self.seen_generation, generation)
            current = self._current
            if current is None or current.generation != generation:
                current = self._load(generation) or self._build(generation)
                self._current = current
            self._failure = None
            return current

    def wait_for_rebuild(self, timeout_s: float | None = None) -> bool:
        """Wait for a background rebuild to finish (for tests and benchmarks); False if one is still running."""
        rebuilding = self._rebuilding
        if rebuilding is not None:
            rebuilding.join(timeout_s)
            return not rebuilding.is_alive()
        return True

    def _rebuild_in_background(self) -> None:
        with contextlib.suppress(RuntimeError):  # a thread cannot start while the interpreter shuts down
            if self._rebuilding is None or not self._rebuilding.is_alive():
                self._rebuilding = threading.Thread(target=self._rebuild, name="anaphora-index-rebuild", daemon=True)
                self._rebuilding.start()

    def _rebuild(self) -> None:
        started = time.perf_counter()
        try:
            built = self.refresh()
        except ConfigurationError as exc:  # the embedder changed: turns say so, as they did before
            self._failure = exc
        except Exception:  # the old generation keeps serving; the next check tries again
            log.exception("rebuilding the search indexes failed; the previous generation keeps serving")
        else:
            log.info("search indexes at generation %d (%.1f s)", built.generation, time.perf_counter() - started)

    def _check_embedder(self) -> None:
        built_with = self.corpus.embedder()
        if built_with and built_with != self.embedder_name and self.corpus.chunk_count():
            raise embedder_mismatch(built_with, self.embedder_name)

    def _stamp_for(self, generation: int) -> dict:
        """What an index must have been built from to be reused: this store, this generation, this embedder."""
        return {
            "store": self.corpus.db.get_meta("store_id"),
            "generation": generation,
            "embedder": self.embedder_name,
            "exact_below": self.exact_below,
        }

    def _stamp(self) -> Path:
        return self.directory / "stamp.json"

    def _load(self, generation: int) -> SearchIndexes | None:
        self._check_embedder()
        try:
            stamp = json.loads(self._stamp().read_text())
            if stamp != self._stamp_for(generation):
                return None
            return SearchIndexes(
                generation,
                BM25Index.load(self.directory / "bm25"),
                DenseIndex.load(self.directory / "dense", self.dim),
            )
        except (OSError, ValueError, RuntimeError, KeyError):
            return None

    def _build(self, generation: int) -> SearchIndexes:
        """A corpus of ``child_from`` passages or more is built by a child process at low priority
        (:mod:`anaphora.retrieval.rebuild`) and loaded from the disk cache; a smaller one, or when the child cannot
        (an in-memory database, a read-only data dir), here."""
        child_from = self.child_from
        if child_from is not None and self.corpus.db.path != ":memory:" and self.corpus.chunk_count() >= child_from:
            spec = BuildSpec(
                self.corpus.db.path, str(self.directory), self.embedder_name, self.dim, self.exact_below, generation
            )
            if build_in_child(spec):
                built = self._load(generation)
                if built is not None:
                    return built
        return self.build_here(generation)

    def build_here(self, generation: int) -> SearchIndexes:
        """Build the indexes in this thread and save them to the cache directory (best effort)."""
        keys, texts = self.corpus.keys_and_texts()
        bm25 = BM25Index.build(keys, texts)
        vector_keys, vectors = self.corpus.keys_and_vectors()
        if vectors is not None and vectors.shape[1] != self.dim:
            raise ConfigurationError(
                f"the stored passage vectors have {vectors.shape[1]} dimensions but the embedder gives {self.dim}",
                hint="re-embed with: anaphora ingest --rebuild PATH (or use a new ANAPHORA_DATA_DIR)",
            )
        dense = DenseIndex.build(vector_keys, vectors, self.dim, exact_below=self.exact_below)
        with contextlib.suppress(OSError):  # a read-only data dir still serves from memory; the next start rebuilds
            self._save(generation, bm25, dense)
        return SearchIndexes(generation, bm25, dense)

    def _save(self, generation: int, bm25: BM25Index, dense: DenseIndex) -> None:
        # named per process: service workers starting together on one data dir each stage their own copy
        staging = self.directory.with_name(f"{self.directory.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bm25").mkdir(parents=True)
        bm25.save(staging / "bm25")
        dense.save(staging / "dense")
        (staging / "stamp.json").write_text(json.dumps(self._stamp_for(generation)))
        shutil.rmtree(self.directory, ignore_errors=True)
        staging.rename(self.directory)
