"""Building the search indexes of a large corpus in a child process at low CPU priority.

A rebuild is CPU work of seconds to minutes (tokenizing every passage for BM25, inserting every vector into the
HNSW graph). Done in a thread of the service it holds the GIL for its Python parts and competes for the cores with
the turns it must not slow: measured on two cores with a 30k-passage corpus, turns during an in-process rebuild had
10x the warm p99 (bench/index_rebuild.py). The child (``python -m anaphora.retrieval.build_child SPEC``) lowers its
own priority, reads the chunk table through its own SQLite connection, and writes the stamped indexes to the cache
directory, which the service then loads (a fraction of a second); turns meanwhile search the previous generation.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import asdict, dataclass

log = logging.getLogger("anaphora.retrieval")

NICENESS = 15  # the child yields the cores to the service's turns
CHILD_FROM = 5_000  # passages: a smaller corpus builds in well under a second, faster than a child starts


@dataclass(frozen=True)
class BuildSpec:
    """What the child needs to build one generation: where the corpus and the index cache are, and how to build."""

    database: str
    directory: str
    embedder: str
    dim: int
    exact_below: int
    generation: int


def build_in_child(spec: BuildSpec, *, timeout_s: float = 3600.0) -> bool:
    """Build and save the indexes in a child process; False (logged) if it could not, so the caller builds here."""
    command = [sys.executable, "-m", "anaphora.retrieval.build_child", json.dumps(asdict(spec))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("the index rebuild process could not run (%s); building in this process", exc)
        return False
    if done.returncode != 0:
        log.warning("the index rebuild process failed (%s); building in this process", done.stderr.strip()[-500:])
        return False
    return True
