"""The search indexes derived from the chunk table, cached on disk and rebuilt when the corpus changed.

SQLite is the truth; ``bm25/`` and ``dense/`` under ``<data_dir>/index`` are caches stamped with the corpus
generation they were built from. A stale, missing or unreadable cache is rebuilt, so a crash between a
corpus write and an index save costs a rebuild, never a wrong answer.

Reading the generation is a query on the shared SQLite connection, which under load queues behind the turns being
stored; so it is read at most every ``recheck_s`` seconds, and at once after a change made in this process. A
change made by another process (``anaphora ingest`` beside a running service) shows within ``recheck_s``.
"""

from __future__ import annotations

import contextlib
import json
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
from anaphora.store.protocols import embedder_mismatch
from anaphora.store.sqlite_corpus import SQLiteCorpus


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
    ) -> None:
        """``dim`` may be a callable, so that the embedder is loaded only when an index is first needed.
        ``exact_below``: corpora with fewer passages are searched by an exact scan, larger ones by HNSW."""
        self.corpus = corpus
        self.exact_below = exact_below
        self.directory = directory
        self.embedder_name = embedder_name
        self.recheck_s = recheck_s
        self._dim = dim
        self._current: SearchIndexes | None = None
        self._checked: tuple[float, int] = (float("-inf"), -1)  # (when, corpus.local_writes) of the last check
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if callable(self._dim):
            self._dim = self._dim()
        return self._dim

    def get(self) -> SearchIndexes:
        current = self._current
        checked_at, writes_seen = self._checked
        now = time.monotonic()
        if current is not None and writes_seen == self.corpus.local_writes and now - checked_at < self.recheck_s:
            return current
        writes = self.corpus.local_writes
        generation = self.corpus.generation()
        self._checked = (now, writes)
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            if self._current is None or self._current.generation != generation:
                self._current = self._load(generation) or self._build(generation)
            return self._current

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
