"""The extractive answer reads the passages around the shown ones (``extractive_neighbours``): the page's next
passage holds the setting the matched one only talks about. They only add candidates: scored as the passage they
adjoin, they never displace a unit that answers better."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.answering.extractive import ExtractiveAnswerer, ExtractRequest
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.types import Chunk, Passage

pytestmark = pytest.mark.unit

PAGE = [
    "Compaction marks expired log chunks for deletion once their retention period has passed.",
    "Marked chunks are removed after retention_delete_delay, which defaults to 2h, by the compactor's sweeper.",
    "The compactor also rewrites index files into a single file per day.",
]
QUESTION = "How long after the retention period is a marked chunk really removed by the sweeper?"


def page(source: str = "retention.md") -> list[Chunk]:
    return [Chunk(id=f"{source}#{n}", text=t, source=source, ordinal=n) for n, t in enumerate(PAGE, start=1)]


class PageNeighbours:
    """A passage index's ``neighbours`` over fixed pages, recording what it was asked."""

    def __init__(self, *pages: list[Chunk]) -> None:
        self.chunks = [c for p in pages for c in p]
        self.asked: list[tuple[list[str], int]] = []

    def __call__(self, ids: Sequence[str], span: int) -> dict[str, list[Chunk]]:
        self.asked.append((list(ids), span))
        found: dict[str, list[Chunk]] = {}
        for anchor in (c for c in self.chunks if c.id in ids):
            around = [
                c
                for c in self.chunks
                if c.source == anchor.source and c.id != anchor.id and abs(c.ordinal - anchor.ordinal) <= span
            ]
            if around:
                found[anchor.id] = around
        return found


def shown(chunk: Chunk) -> Passage:
    return Passage(id=chunk.id, text=chunk.text, source=chunk.source, heading=chunk.heading, score=0.9)


def answerer(neighbours: PageNeighbours | None, span: int) -> ExtractiveAnswerer:
    return ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, neighbours=neighbours, neighbour_span=span)


def request(*documents: Passage) -> ExtractRequest:
    return ExtractRequest(question=QUESTION, query=QUESTION, documents=documents)


async def test_the_next_passage_of_the_page_is_quoted_and_given_as_quoted() -> None:
    first = shown(page()[0])
    without = await answerer(None, 1).answer_turn(request(first))
    assert without is not None and "retention_delete_delay" not in without.text
    extract = await answerer(PageNeighbours(page()), 1).answer_turn(request(first))
    assert extract is not None and "retention_delete_delay" in extract.text
    assert "[retention.md#2]" in extract.text
    assert "retention.md#2" in [p.id for p in extract.quoted]  # what the turn then cites


def test_around_gives_each_neighbour_once_with_the_rank_of_the_passage_it_adjoins() -> None:
    other = [Chunk(id=f"tls.md#{n}", text=f"TLS paragraph {n}.", source="tls.md", ordinal=n) for n in (1, 2, 3, 4)]
    index = PageNeighbours(page(), other)
    passages, ranks = answerer(index, 1).around([shown(other[2]), shown(page()[0]), shown(page()[1])])
    assert [p.id for p in passages] == ["tls.md#2", "tls.md#4", "retention.md#3"]  # retention.md#2 is shown
    assert ranks == [0, 0, 2]
    assert index.asked == [(["tls.md#3", "retention.md#1", "retention.md#2"], 1)]
    assert all(p.source for p in passages) and passages[2].text == PAGE[2]
    on_page, ranks = answerer(index, 1).around([shown(other[2]), shown(page()[0]), shown(page()[1])], "retention.md")
    assert [p.id for p in on_page] == ["retention.md#3"] and ranks == [2]
    assert index.asked[-1] == (["retention.md#1", "retention.md#2"], 1)  # only the page asked for is read


async def test_only_the_lead_page_is_read_around() -> None:
    """The lead is chosen from the shown passages; the passages around the lead's page's shown passages are read
    (one store read), no other page's."""
    other = [
        Chunk(id=f"tls.md#{n}", text=f"TLS certificates are renewed, part {n}.", source="tls.md", ordinal=n)
        for n in (1, 2)
    ]
    index = PageNeighbours(page(), other)
    extract = await answerer(index, 1).answer_turn(request(shown(page()[0]), shown(other[0])))
    assert extract is not None and extract.points[0].passage_id == "retention.md#1"
    assert index.asked == [(["retention.md#1"], 1)]


async def test_no_span_reads_nothing() -> None:
    index = PageNeighbours(page())
    extract = await answerer(index, 0).answer_turn(request(shown(page()[0])))
    assert index.asked == [] and extract is not None and "retention_delete_delay" not in extract.text
    assert answerer(None, 2).around([shown(page()[0])]) == ([], [])


async def test_a_neighbour_never_displaces_a_unit_that_answers_better() -> None:
    """The shown passage's sentence that answers leads as it did without neighbours; the neighbours only add."""
    middle = shown(page()[1])
    alone = await answerer(None, 1).answer_turn(request(middle))
    widened = await answerer(PageNeighbours(page()), 1).answer_turn(request(middle))
    assert alone is not None and widened is not None
    assert widened.points[0] == alone.points[0]
    assert widened.points[0].passage_id == "retention.md#2"


def test_a_quoted_turn_reads_and_cites_the_passage_after_the_one_retrieved(tmp_path: Path) -> None:
    """Through a whole turn on the embedded store: the first stage returns only the page's first passage (one
    candidate); the answer quotes the next one and cites it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "retention.md").write_text("# Retention\n\n" + "\n\n".join(PAGE) + "\n", encoding="utf-8")

    def ask(neighbours: int) -> tuple[str, list[str]]:
        settings = Settings(
            data_dir=tmp_path / f"data-{neighbours}",
            chat_model="fake",
            embedder="hashing",
            answer_mode="extractive",
            similarity_threshold=0.0,
            extractive_min_relevance=0.0,
            chunk_tokens=32,
            chunk_overlap=0,
            candidates=1,
            top_k=1,
            extractive_neighbours=neighbours,
        )
        with Anaphora(settings, model=FakeChatModel()) as rag:
            rag.ingest([docs])
            assert len(rag.components.corpus.documents()) == 1
            result = rag.ask("expired log chunks marked for deletion: when are marked chunks removed?")
        assert [p.id for p in result.trace.retrieved][:1] == ["retention.md#1"]
        return result.answer, [c.id for c in result.citations]

    answer, cited = ask(0)
    assert "retention_delete_delay" not in answer and cited == ["retention.md#1"]
    answer, cited = ask(1)
    assert "retention_delete_delay" in answer and "retention.md#2" in cited
