"""`anaphora ingest --workers N`: the embedding spread over worker processes gives the same vectors, in order, and the
same index as one process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anaphora.app import Anaphora
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.embeddings.pool import ProcessPoolEmbedder
from anaphora.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_pool_gives_the_local_vectors_in_order(tmp_path: Path) -> None:
    texts = [f"sentence {n} about widgets " * (n % 7 + 1) for n in range(41)]
    local = HashingEmbedder()
    with ProcessPoolEmbedder(Settings(data_dir=tmp_path, embedder="hashing"), 2, local) as pool:
        assert pool.name == local.name and pool.dim == 384
        assert np.allclose(pool.embed(texts), local.embed(texts))
        assert pool.embed([]).shape == (0, 384)


def test_ingest_with_two_workers_indexes_what_one_process_does(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(12):
        (docs / f"p{n}.md").write_text(f"# Page {n}\n\nWidget {n} is configured with the flag --widget-{n}.\n")
    rows = []
    for workers in (1, 2):
        with Anaphora(data_dir=tmp_path / f"data{workers}", embedder="hashing", chat_model="fake") as rag:
            report = rag.ingest([docs], workers=workers)
            assert len(report.added) == 12
            rows.append(rag.components.database.query("SELECT id, text, vector FROM chunks ORDER BY id"))
    assert [tuple(r) for r in rows[0]] == [tuple(r) for r in rows[1]]
