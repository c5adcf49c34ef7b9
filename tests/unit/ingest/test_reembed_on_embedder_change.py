"""An index embedded by another embedder (the bundled model at the other precision) is re-embedded by the next
ingestion, every passage of every folder, with a line saying so: never refused, never half one and half the other."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from anaphora.app import build_components
from anaphora.embeddings import CachedEmbedder
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.ingest import Ingestor
from anaphora.settings import Settings

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


class OtherPrecision(HashingEmbedder):
    """The same model under another name with slightly different vectors, as int8 is to fp32."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.name = "hashing-384-int8"
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt  # the user stops the run
        vectors = super().embed(texts)
        vectors[:, 0] += 0.1
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def folder(tmp_path: Path, name: str, pages: int) -> Path:
    docs = tmp_path / name
    docs.mkdir()
    for n in range(pages):
        (docs / f"page-{n}.md").write_text(f"# Page {n}\n\nThe {name} page number {n} says how to set option {n}.\n")
    return docs


def stored_vectors(app) -> np.ndarray:
    return app.corpus.keys_and_vectors()[1]


def test_the_next_ingestion_re_embeds_every_stored_passage_and_says_so(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", embed_batch_size=2)
    app = build_components(settings)
    try:
        first, second = folder(tmp_path, "first", 3), folder(tmp_path, "second", 2)
        app.ingestor.run([first])
        app.ingestor.run([second])
        assert app.corpus.embedder() == "hashing-384"
        before = stored_vectors(app)
        other = OtherPrecision()
        ingestor = Ingestor(app.corpus, CachedEmbedder(other, app.embedder.cache), settings.ingest, stored=app.corpus)
        lines: list[str] = []
        report = ingestor.run([first], notice=lines.append)  # only one of the two folders named
        assert report.reembedded == ("hashing-384", 5)
        assert lines == ["the index was embedded by hashing-384; re-embedding its 5 passages with hashing-384-int8"]
        assert app.corpus.embedder() == "hashing-384-int8"
        _, texts = app.corpus.keys_and_texts()
        assert np.allclose(stored_vectors(app), other.embed(texts), atol=1e-6)  # the second folder's too
        assert not np.allclose(stored_vectors(app), before)
        assert ingestor.run([first]).reembedded is None  # once
    finally:
        app.database.close()


def test_a_stopped_re_embedding_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", embed_batch_size=1)
    app = build_components(settings)
    try:
        docs = folder(tmp_path, "docs", 40)  # more than one window of 16 batches of 1
        app.ingestor.run([docs])
        before, generation = stored_vectors(app), app.corpus.generation()
        ingestor = Ingestor(
            app.corpus,
            CachedEmbedder(OtherPrecision(fail_after=1), app.embedder.cache),
            settings.ingest,
            stored=app.corpus,
        )
        with pytest.raises(KeyboardInterrupt):
            ingestor.run([docs])
        assert app.corpus.embedder() == "hashing-384" and app.corpus.generation() == generation
        assert np.array_equal(stored_vectors(app), before)
        done = Ingestor(
            app.corpus, CachedEmbedder(OtherPrecision(), app.embedder.cache), settings.ingest, stored=app.corpus
        ).run([docs])
        assert done.reembedded == ("hashing-384", 40) and app.corpus.embedder() == "hashing-384-int8"
    finally:
        app.database.close()
