"""The child process of :mod:`anaphora.retrieval.rebuild`: builds one generation of the search indexes at low CPU
priority and saves it, stamped, to the index cache directory. ``python -m anaphora.retrieval.build_child SPEC``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from anaphora.retrieval.indexes import IndexCache
from anaphora.retrieval.rebuild import NICENESS, BuildSpec
from anaphora.store.sqlite_corpus import SQLiteCorpus
from anaphora.store.sqlite_database import Database


def main(argv: list[str]) -> int:
    os.nice(NICENESS)
    spec = BuildSpec(**json.loads(argv[0]))
    database = Database(spec.database)
    try:
        corpus = SQLiteCorpus(database)
        cache = IndexCache(corpus, Path(spec.directory), spec.embedder, spec.dim, exact_below=spec.exact_below)
        cache.build_here(spec.generation)
    finally:
        database.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
