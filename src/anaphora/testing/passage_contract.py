"""The contract every corpus backend must honour (document registry + passage index), as a pytest suite to subclass.

Like :mod:`anaphora.testing.store_contract` for conversations: a backend's test module subclasses
:class:`PassageStoreContract` and provides a ``stores`` fixture that yields an *empty* corpus as a pair
``(DocumentRegistry, PassageIndex)`` over the same data, built for the ``hashing`` embedder (384 dimensions, no
model, deterministic)::

    import pytest
    from anaphora.testing.passage_contract import PassageStoreContract

    class TestMyBackend(PassageStoreContract):
        @pytest.fixture
        def stores(self):
            store = MyStore(..., embedder_name="hashing-384", dim=384)
            yield store, store
            store.close()

Documents are written through the real :class:`~anaphora.ingest.Ingestor`, so the suite checks what ingestion relies
on (idempotent re-ingest, atomic replacement, pruning) as well as search: a tiny corpus whose answers are known, so
lexical and dense orderings can be asserted without a model. A registry write is in ``lexical`` and ``dense`` once
``warm_up`` has run (ingestion runs it; an index may also catch up by itself, in the background); ``passages`` never
returns a removed passage, even before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.errors import ConfigurationError, PassageIdTakenError
from anaphora.ingest import IngestReport
from anaphora.ingest.searchable import SearchableIngestor
from anaphora.settings import IngestSettings
from anaphora.store.protocols import DocumentRegistry, DocumentVersion, PassageIndex
from anaphora.store.sqlite_corpus import search_text
from anaphora.types import Chunk

DOCUMENTS = {
    "airships.md": "# Airships\n\nThe zeppelin airship floated on hydrogen gas above the harbour town.\n",
    "coffee.md": "# Coffee\n\nGrind the espresso beans finely before pulling a strong espresso shot.\n",
    "helm.md": "# Kubernetes\n\nInstall the helm chart into the kubernetes cluster with one command.\n",
    "garden.txt": "Water the tomato plants in the vegetable garden every summer morning.\n",
}
NUL_TEXT = "Caramelised crème brûlée\x00 with 日本語 and émojis 🍮 on top"


def ids(index: PassageIndex, ranking: list[tuple[int, float]]) -> list[str]:
    """The passage ids of a ranking, in its order."""
    chunks = index.passages([key for key, _ in ranking])
    return [chunks[key].id for key, _ in ranking]


def assert_ranked(ranking: list[tuple[int, float]]) -> None:
    scores = [score for _, score in ranking]
    assert scores == sorted(scores, reverse=True)
    assert len({key for key, _ in ranking}) == len(ranking)


class PassageStoreContract:
    """Subclass and provide a ``stores`` fixture (an empty registry and index); every test must pass unchanged."""

    @pytest.fixture
    def stores(self) -> tuple[DocumentRegistry, PassageIndex]:  # pragma: no cover - overridden
        raise NotImplementedError("a PassageStoreContract subclass must provide a `stores` fixture")

    @pytest.fixture
    def registry(self, stores: tuple[DocumentRegistry, PassageIndex]) -> DocumentRegistry:
        return stores[0]

    @pytest.fixture
    def index(self, stores: tuple[DocumentRegistry, PassageIndex]) -> PassageIndex:
        return stores[1]

    @pytest.fixture
    def embedder(self) -> HashingEmbedder:
        return HashingEmbedder()

    @pytest.fixture
    def docs(self, tmp_path: Path) -> Path:
        folder = tmp_path / "contract-docs"
        folder.mkdir()
        for name, text in DOCUMENTS.items():
            (folder / name).write_text(text, encoding="utf-8")
        return folder

    @pytest.fixture
    def ingest(
        self, registry: DocumentRegistry, index: PassageIndex, embedder: HashingEmbedder
    ) -> Callable[..., IngestReport]:
        """Ingests, then makes the writes searchable (``warm_up``), as the application's ingestor does."""
        ingestor = SearchableIngestor(registry, embedder, IngestSettings(), index=index)
        return lambda *paths, **options: ingestor.run(list(paths), **options)

    @pytest.fixture
    def ingested(self, ingest: Callable[..., IngestReport], docs: Path) -> Path:
        report = ingest(docs)
        assert sorted(report.added) == sorted(DOCUMENTS)
        return docs

    def embed(self, embedder: HashingEmbedder, *texts: str) -> np.ndarray:
        return embedder.embed(list(texts))

    # -- registry ----------------------------------------------------------------------------------------------
    def test_ingest_registers_documents(self, registry: DocumentRegistry, ingested: Path) -> None:
        documents = registry.documents()
        assert sorted(d.source for d in documents) == sorted(DOCUMENTS)
        assert {d.root for d in documents} == {str(ingested.resolve())}
        assert all(d.chunk_count == 1 and len(d.content_hash) == 64 and d.ingested_at > 0 for d in documents)

    def test_reingest_of_unchanged_files_writes_nothing(
        self, registry: DocumentRegistry, index: PassageIndex, ingest: Callable[..., IngestReport], ingested: Path
    ) -> None:
        before = sorted(registry.documents(), key=lambda d: d.source)
        [ranking] = index.lexical(["espresso"], 5)
        report = ingest(ingested)
        assert report.chunks_written == 0 and sorted(report.unchanged) == sorted(DOCUMENTS)
        assert sorted(registry.documents(), key=lambda d: d.source) == before
        assert index.lexical(["espresso"], 5) == [ranking]

    def test_changed_document_replaces_its_passages(
        self, registry: DocumentRegistry, index: PassageIndex, ingest: Callable[..., IngestReport], ingested: Path
    ) -> None:
        [[(airship_key, _)]] = index.lexical(["zeppelin"], 5)
        (ingested / "coffee.md").write_text("# Tea\n\nSteep the green tea leaves.\n\nServe jasmine tea hot.\n")
        report = ingest(ingested)
        assert report.updated == ["coffee.md"] and report.chunks_written >= 1
        assert index.lexical(["espresso"], 5) == [[]]
        [found] = index.lexical(["steep jasmine"], 5)
        assert ids(index, found)[0].startswith("coffee.md#")
        assert "Steep" in index.passages([found[0][0]])[found[0][0]].text
        coffee = next(d for d in registry.documents() if d.source == "coffee.md")
        assert coffee.chunk_count == report.chunks_written
        assert [key for key, _ in index.lexical(["zeppelin"], 5)[0]] == [airship_key]  # other documents untouched

    def test_failed_replacement_keeps_the_old_passages(
        self, registry: DocumentRegistry, index: PassageIndex, ingested: Path
    ) -> None:
        root = str(ingested.resolve())
        chunks = [Chunk(id=f"coffee.md#{n}", text=f"decaf {n}", source="coffee.md", ordinal=n) for n in (1, 2)]
        one_vector_short = HashingEmbedder().embed(["decaf 1"])
        with pytest.raises(ValueError):
            registry.replace_document(root, "coffee.md", "f" * 64, chunks, one_vector_short, "hashing-384")
        assert ids(index, index.lexical(["espresso"], 5)[0]) == ["coffee.md#1"]
        assert index.lexical(["decaf"], 5) == [[]]
        assert next(d for d in registry.documents() if d.source == "coffee.md").content_hash != "f" * 64

    def test_pruned_and_removed_documents_leave_the_index(
        self, registry: DocumentRegistry, index: PassageIndex, ingest: Callable[..., IngestReport], ingested: Path
    ) -> None:
        root = str(ingested.resolve())
        (ingested / "garden.txt").unlink()
        assert ingest(ingested).removed == ["garden.txt"]
        assert index.lexical(["tomato"], 5) == [[]]
        helm = [key for key, _ in index.lexical(["helm chart"], 5)[0]]
        assert helm
        assert registry.remove_source("helm.md") == [root]
        assert registry.remove_source("helm.md") == []
        assert index.passages(helm) == {}, "a removed passage reads back nowhere, at once"
        index.warm_up()  # a write made outside ingestion is in the search lists once the index caught up
        assert index.lexical(["helm chart"], 5) == [[]]
        assert registry.remove_documents([(root, "airships.md"), (root, "never-ingested.md")]) == 1
        assert registry.remove_documents([]) == 0
        assert [d.source for d in registry.documents()] == ["coffee.md"]
        index.warm_up()
        dense = index.dense(self.embed(HashingEmbedder(), "zeppelin helm tomato espresso"), 10)
        assert ids(index, dense[0]) == ["coffee.md#1"]

    def test_documents_written_together_are_all_written_or_none(
        self, registry: DocumentRegistry, index: PassageIndex, ingested: Path
    ) -> None:
        embedder = HashingEmbedder()

        def version(source: str, chunk_id: str, text: str) -> DocumentVersion:
            chunk = Chunk(id=chunk_id, text=text, source=source, ordinal=1)
            return DocumentVersion("/other", source, "e" * 64, [chunk], embedder.embed([text]))

        clashing = version("coffee.md", "coffee.md#1", "a rival coffee page")  # another root, a taken id
        with pytest.raises(PassageIdTakenError):
            registry.replace_documents([version("kite.md", "kite.md#1", "kites fly"), clashing], "hashing-384")
        assert index.lexical(["kites"], 5) == [[]] and len(registry.documents()) == len(DOCUMENTS)
        registry.replace_documents(
            [version("kite.md", "kite.md#1", "kites fly"), version("sail.md", "sail.md#1", "sails billow")],
            "hashing-384",
        )
        index.warm_up()
        assert sorted(ids(index, index.lexical(["kites sails"], 5)[0])) == ["kite.md#1", "sail.md#1"]
        assert len(registry.documents()) == len(DOCUMENTS) + 2

    def test_taken_chunk_ids_are_those_of_other_documents(self, registry: DocumentRegistry, ingested: Path) -> None:
        root = str(ingested.resolve())
        assert registry.taken_chunk_ids(["coffee.md#1", "new.md#1"], "/elsewhere", "coffee.md") == {"coffee.md#1"}
        assert registry.taken_chunk_ids(["coffee.md#1"], root, "coffee.md") == set()
        assert registry.taken_chunk_ids([], root, "coffee.md") == set()

    # -- search ------------------------------------------------------------------------------------------------
    def test_lexical_search_finds_the_passages_with_the_words(self, index: PassageIndex, ingested: Path) -> None:
        [ranking] = index.lexical(["How fine should espresso beans be ground?"], 10)
        assert ids(index, ranking)[0] == "coffee.md#1"
        assert_ranked(ranking)
        assert all(score > 0 for _, score in ranking)
        [both] = index.lexical(["zeppelin or helm"], 10)
        assert sorted(ids(index, both)) == ["airships.md#1", "helm.md#1"]

    def test_dense_search_ranks_by_cosine_similarity(
        self, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        [ranking] = index.dense(self.embed(embedder, "install a helm chart on kubernetes"), 10)
        assert ids(index, ranking)[0] == "helm.md#1"
        assert len(ranking) == len(DOCUMENTS)
        assert_ranked(ranking)
        assert all(-1.0 - 1e-5 <= score <= 1.0 + 1e-5 for _, score in ranking)
        assert ranking[0][1] > ranking[1][1]
        assert len(index.dense(self.embed(embedder, "helm"), 2)[0]) == 2

    def test_passages_come_back_whole(self, index: PassageIndex, ingested: Path) -> None:
        [[(key, _)]] = index.lexical(["zeppelin"], 5)
        chunk = index.passages([key, 10**12])[key]
        assert set(index.passages([key, 10**12])) == {key}
        assert (chunk.id, chunk.source, chunk.heading, chunk.ordinal) == ("airships.md#1", "airships.md", "Airships", 1)
        assert chunk.text.startswith("The zeppelin airship")
        assert index.passages([]) == {}

    def test_batches_give_one_ranking_per_query_in_order(
        self, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        queries = ["espresso", "", "zeppelin hydrogen", "tomato"]
        assert index.lexical(queries, 5) == [index.lexical([q], 5)[0] for q in queries]
        vectors = self.embed(embedder, "espresso shot", "tomato garden", "kubernetes cluster")
        batched = index.dense(vectors, 3)
        single = [index.dense(vector[None, :], 3)[0] for vector in vectors]
        assert [[k for k, _ in r] for r in batched] == [[k for k, _ in r] for r in single]
        assert [ids(index, r)[0] for r in batched] == ["coffee.md#1", "garden.txt#1", "helm.md#1"]

    def test_similarity_equals_the_dense_score(
        self, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        vectors = self.embed(embedder, "espresso beans", "zeppelin")
        rankings = index.dense(vectors, 10)
        wanted = [[key for key, _ in rankings[0]] + [10**12], [rankings[1][0][0]]]
        found = index.similarity(vectors, wanted)
        assert found[0] == {key: pytest.approx(score, abs=1e-5) for key, score in rankings[0]}
        assert found[1] == {rankings[1][0][0]: pytest.approx(rankings[1][0][1], abs=1e-5)}
        assert index.similarity(vectors, [[], []]) == [{}, {}]

    def test_empty_and_wordless_queries_find_nothing(
        self, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        assert index.lexical(["", "   ", "the of and", "?!", "xylophonist"], 5) == [[], [], [], [], []]
        assert index.lexical([], 5) == []
        assert index.dense(np.empty((0, embedder.dim), dtype=np.float32), 5) == []

    def test_an_empty_corpus_finds_nothing(
        self, registry: DocumentRegistry, index: PassageIndex, embedder: HashingEmbedder
    ) -> None:
        assert registry.documents() == []
        assert index.lexical(["espresso"], 5) == [[]]
        assert index.dense(self.embed(embedder, "espresso"), 5) == [[]]
        assert index.passages([1, 2, 3]) == {}

    def test_a_vector_of_another_dimension_is_a_configuration_error(self, index: PassageIndex, ingested: Path) -> None:
        for search in (
            lambda: index.dense(np.ones((1, 385), dtype=np.float32), 5),
            lambda: index.similarity(np.ones((1, 12), dtype=np.float32), [[1]]),
        ):
            with pytest.raises(ConfigurationError) as caught:
                search()
            assert "dimensions" in caught.value.message
            assert "--rebuild" in (caught.value.hint or "")

    # -- a page's neighbouring passages -------------------------------------------------------------------------
    def write_page(self, registry: DocumentRegistry, embedder: HashingEmbedder, source: str, texts: list[str]) -> None:
        chunks = [
            Chunk(id=f"{source}#{n}", text=text, source=source, heading=source.split(".")[0].title(), ordinal=n)
            for n, text in enumerate(texts, start=1)
        ]
        vectors = embedder.embed([search_text(c.heading, c.text) for c in chunks])
        registry.replace_document("/pages", source, "b" * 64, chunks, vectors, embedder.name)

    def test_neighbours_are_the_passages_around_it_in_its_document(
        self, registry: DocumentRegistry, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        self.write_page(registry, embedder, "manual.md", [f"step {n} of the manual" for n in range(1, 7)])
        self.write_page(registry, embedder, "other.md", [f"another page, part {n}" for n in range(1, 4)])
        asked = ["manual.md#3", "manual.md#1", "coffee.md#1", "nowhere.md#1", "manual.md#6"]
        found = {anchor: [c.id for c in chunks] for anchor, chunks in index.neighbours(asked, 1).items()}
        assert found == {
            "manual.md#3": ["manual.md#2", "manual.md#4"],
            "manual.md#1": ["manual.md#2"],  # not other.md#2 nor coffee.md#1: only its own document
            "manual.md#6": ["manual.md#5"],
        }, "a passage alone in its document and an unknown id are left out"
        wider = index.neighbours(["manual.md#3"], 2)["manual.md#3"]
        assert [c.ordinal for c in wider] == [1, 2, 4, 5]
        assert (wider[0].id, wider[0].source, wider[0].heading, wider[0].text) == (
            "manual.md#1",
            "manual.md",
            "Manual",
            "step 1 of the manual",
        )
        both = index.neighbours(["manual.md#2", "manual.md#3"], 1)
        assert [c.id for c in both["manual.md#2"]] == ["manual.md#1", "manual.md#3"]
        assert [c.id for c in both["manual.md#3"]] == ["manual.md#2", "manual.md#4"]
        assert index.neighbours(["manual.md#3"], 0) == {}
        assert index.neighbours([], 1) == {}

    def test_neighbours_follow_the_registry_at_once(
        self, registry: DocumentRegistry, index: PassageIndex, embedder: HashingEmbedder, ingested: Path
    ) -> None:
        self.write_page(registry, embedder, "manual.md", [f"step {n} of the manual" for n in range(1, 5)])
        assert [c.text for c in index.neighbours(["manual.md#1"], 1)["manual.md#1"]] == ["step 2 of the manual"]
        self.write_page(registry, embedder, "manual.md", ["the new first step", "the new second step"])
        assert [c.text for c in index.neighbours(["manual.md#1"], 1)["manual.md#1"]] == ["the new second step"]
        assert index.neighbours(["manual.md#3"], 1) == {}, "a passage of the old version is gone"
        assert registry.remove_source("manual.md") == ["/pages"]
        assert index.neighbours(["manual.md#1", "manual.md#2"], 1) == {}

    def test_unicode_round_trips_and_nul_is_stored_or_replaced(
        self, registry: DocumentRegistry, index: PassageIndex, embedder: HashingEmbedder
    ) -> None:
        chunk = Chunk(id="crème.md#1", heading="Desserts ünïcode", text=NUL_TEXT, source="crème.md", ordinal=1)
        vectors = embedder.embed([search_text(chunk.heading, chunk.text)])
        registry.replace_document("/données", "crème.md", "a" * 64, [chunk], vectors, embedder.name)
        index.warm_up()
        [ranking] = index.lexical(["brûlée"], 5)
        stored = index.passages([ranking[0][0]])[ranking[0][0]]
        assert stored.text in (NUL_TEXT, NUL_TEXT.replace("\x00", "\ufffd"))
        assert (stored.id, stored.heading, stored.source) == ("crème.md#1", "Desserts ünïcode", "crème.md")
        assert [(d.root, d.source) for d in registry.documents()] == [("/données", "crème.md")]
        assert index.lexical(["brûlée\x00 crème"], 5)[0][0][0] == ranking[0][0]
        assert registry.taken_chunk_ids(["crème.md#1"], "/ailleurs", "crème.md") == {"crème.md#1"}
        assert registry.remove_source("crème.md") == ["/données"]
