"""HybridRetriever over a real (tiny) SQLite corpus with the HashingEmbedder: bm25, dense and rrf fusion."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from anaphora.app import Components, build_components
from anaphora.retrieval import HybridRetriever
from anaphora.settings import Settings
from anaphora.types import Passage
from tests.conftest import ROOT

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake")


@pytest.fixture
def app(settings: Settings, tmp_path: Path) -> Iterator[Components]:
    components = build_components(settings)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "install.md").write_text(
        "# Installation\n\nUse pip to install the zanzibar package on your machine.\n\n"
        "## Upgrading\n\nRun pip with the upgrade flag to fetch newer zanzibar releases.\n",
        encoding="utf-8",
    )
    (folder / "cooking.md").write_text(
        "# Recipes\n\nBake the sourdough bread in a hot oven for forty minutes.\n", encoding="utf-8"
    )
    (folder / "space.txt").write_text(
        "Astronauts aboard the orbital station observe distant nebulae through telescopes.\n",
        encoding="utf-8",
    )
    (folder / "faq.jsonl").write_text(
        json.dumps({"id": "faq-1", "title": "Billing", "text": "Invoices are emailed monthly to the owner."})
        + "\n"
        + json.dumps({"id": "faq-2", "title": "Support", "text": "Tickets are answered within a day."})
        + "\n",
        encoding="utf-8",
    )
    report = components.ingestor.run([folder])
    assert len(report.added) == 4
    yield components
    components.database.close()


def retriever(app: Components, **overrides) -> HybridRetriever:
    return HybridRetriever(app.passages, app.embedder, app.settings.retrieval.model_copy(update=overrides))


def assert_sorted(passages: list[Passage]) -> None:
    scores = [p.score for p in passages]
    assert scores == sorted(scores, reverse=True)


async def test_bm25_fusion(app: Components):
    passages = await retriever(app, fusion="bm25").run("zanzibar installation")
    top = passages[0]
    assert (top.id, top.source, top.heading) == ("install.md#1", "install.md", "Installation")
    assert "pip to install the zanzibar package" in top.text
    assert {p.id for p in passages} == {"install.md#1"}  # only chunks sharing a word (the two short sections are one)
    for p in passages:
        assert p.bm25_score == p.score > 0
        assert p.dense_score is None
    assert_sorted(passages)


async def test_dense_fusion(app: Components):
    passages = await retriever(app, fusion="dense").run("invoices emailed monthly")
    top = passages[0]
    assert (top.id, top.source, top.heading) == ("faq-1", "faq.jsonl", "Billing")
    assert top.text == "Invoices are emailed monthly to the owner."
    assert len(passages) == app.corpus.chunk_count()  # the exact scan ranks every chunk
    for p in passages:
        assert p.dense_score == p.score
        assert p.bm25_score is None
        assert -1.0 - 1e-6 <= p.score <= 1.0 + 1e-6
    assert_sorted(passages)


async def test_rrf_fusion_scores(app: Components):
    settings = app.settings
    passages = await retriever(app, fusion="rrf").run("sourdough bread oven")
    top = passages[0]
    assert (top.id, top.source, top.heading) == ("cooking.md#1", "cooking.md", "Recipes")
    # first in both lists: bm25_weight / (k + 1) + dense_weight / (k + 1)
    expected = settings.retrieval.bm25_weight / (settings.retrieval.rrf_k + 1) + settings.retrieval.dense_weight / (
        settings.retrieval.rrf_k + 1
    )
    assert top.score == pytest.approx(expected)
    assert top.bm25_score is not None and top.bm25_score > 0
    assert top.dense_score is not None and top.dense_score > 0
    # chunks without a shared word come only from the dense list
    others = [p for p in passages if p.id != top.id]
    assert others and all(p.bm25_score is None and p.dense_score is not None for p in others)
    assert_sorted(passages)


async def test_rrf_with_zero_dense_weight_follows_bm25(app: Components):
    query = "zanzibar pip upgrade"
    lexical = await retriever(app, fusion="bm25").run(query)
    fused = await retriever(app, fusion="rrf", dense_weight=0.0).run(query)
    assert [p.id for p in fused] == [p.id for p in lexical]
    assert [p.score for p in fused] == pytest.approx(
        [
            app.settings.retrieval.bm25_weight / (app.settings.retrieval.rrf_k + rank)
            for rank in range(1, len(fused) + 1)
        ]
    )


async def test_limit_and_default_candidates(app: Components):
    assert len(await retriever(app, fusion="dense").run("telescopes", limit=2)) == 2
    assert len(await retriever(app, fusion="dense", candidates=3, top_k=3).run("telescopes")) == 3


@pytest.mark.parametrize("query", ["", "   ", "\n"])
async def test_blank_query_returns_nothing(app: Components, query: str):
    assert await retriever(app).run(query) == []


async def test_unknown_words_with_bm25_fusion_return_nothing(app: Components):
    assert await retriever(app, fusion="bm25").run("qwertyuiop asdfghjkl") == []


async def test_components_retriever_sees_new_documents(app: Components, tmp_path: Path):
    (tmp_path / "docs" / "late.md").write_text("# Late\n\nThe platypus lays eggs.\n", encoding="utf-8")
    assert all(p.id != "late.md#1" for p in await app.retriever.run("platypus"))
    app.ingestor.run([tmp_path / "docs"])
    passages = await app.retriever.run("platypus")
    assert passages[0].id == "late.md#1"
    assert passages[0].heading == "Late"


async def test_empty_corpus_returns_nothing(tmp_path: Path):
    settings = Settings(data_dir=tmp_path / "empty", embedder="hashing", chat_model="fake")
    components = build_components(settings)
    try:
        assert await components.retriever.run("anything") == []
    finally:
        components.database.close()


@pytest.mark.parametrize("fusion", ["combsum", "combmnz"])
@pytest.mark.parametrize("normalisation", ["zscore", "minmax"])
async def test_score_fusion_finds_the_passage_both_lists_rank_first(app: Components, fusion, normalisation):
    passages = await retriever(app, fusion=fusion, fusion_normalisation=normalisation).run("zanzibar installation")
    assert passages[0].id == "install.md#1"
    assert_sorted(passages)


async def test_run_many_fuses_queries_and_accepts_explicit_weights(app: Components):
    r = retriever(app)
    queries = ["sourdough bread oven", "invoices emailed monthly"]
    adaptive = await r.run_many(queries)
    assert {p.id for p in adaptive[:2]} >= {"cooking.md#1"}
    only_second = await r.run_many(queries, weights=[0.0, 1.0])
    assert only_second[0].id == "faq-1"
    only_first = await r.run_many(queries, weights=[1.0, 0.0])
    assert only_first[0].id == "cooking.md#1"
    with pytest.raises(ValueError, match="3 weights for 2"):
        await r.run_many([*queries, queries[0]], weights=[1.0, 1.0, 1.0])  # duplicates count once


async def test_a_message_clearer_than_its_expansion_is_retrieved_alone(app: Components, monkeypatch):
    r = retriever(app)
    message, expansion = "sourdough bread oven", "invoices emailed monthly"  # an expansion that drifted away
    margins = iter([0.1, 0.3] * 2)  # the dense heads' margins, in query order: the message's is the clearer
    monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense: next(margins))
    guarded = await r.run_many([expansion, message], message=message)
    assert [p.id for p in guarded] == [p.id for p in await r.run(message)]
    unguarded = await r.run_many([expansion, message])  # the user's words not named: the weighted fusion
    assert unguarded[0].id == "faq-1"  # the expansion leads


async def test_a_message_that_finds_nothing_above_the_floor_is_never_retrieved_alone(app: Components, monkeypatch):
    """ "does any of what you told me change?" finds only passages below the similarity floor; a clear head among
    them is no reason to drop its expansion, which found the topic."""
    r = retriever(app)
    message, expansion = "does any of what you told me change?", "sourdough bread oven"
    margins = iter([0.1, 0.3] * 2)  # the message's head looks the clearer
    monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense: next(margins))
    own = await r.run(message)
    assert own and max(p.dense_score or 0.0 for p in own) < r.settings.similarity_threshold
    fused = await r.run_many([expansion, message], message=message)
    assert fused[0].id == "cooking.md#1"  # the expansion leads, as without the message named
    assert fused[0].id == (await r.run_many([expansion, message]))[0].id


async def test_a_leading_message_keeps_its_ranking_against_a_vaguer_alternate(app: Components, monkeypatch):
    """A message that stands alone leads; the topic's expansion riding along joins only with a much clearer head
    (query_fusion.TOPIC_CLARITY), also when nothing the message finds passes the similarity floor."""
    r = retriever(app)
    for message in ("sourdough bread oven", "does any of what you told me change?"):
        margins = iter([0.2, 0.25] * 2)  # the alternate's head is clearer, but not by half again
        monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense, margins=margins: next(margins))
        fused = await r.run_many([message, "invoices emailed monthly"], message=message)
        assert [p.id for p in fused] == [p.id for p in await r.run(message)]


async def test_a_leading_message_is_joined_by_a_much_clearer_alternate(app: Components, monkeypatch):
    r = retriever(app)
    message, topic = "does any of what you told me change?", "sourdough bread oven"
    margins = iter([0.1, 0.3])  # the topic singles out its passages three times as clearly
    monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense: next(margins))
    fused = await r.run_many([message, topic], message=message)
    assert fused[0].id == "cooking.md#1"
    assert fused.weights == (1.0, 1.0)  # 0.5 x 3, capped at the message's


async def test_run_many_says_how_much_each_query_counted(app: Components, monkeypatch):
    """The weights the trace shows: one per distinct query, in order; 0 for one left out."""
    r = retriever(app)
    assert (await r.run_many(["sourdough bread oven"])).weights == (1.0,)
    assert (await r.run_many(["sourdough bread oven", "sourdough bread oven"])).weights == (1.0,)
    assert (await r.run_many([])).weights == () and await r.run_many([]) == []
    margins = iter([0.2, 0.25])
    monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense: next(margins))
    message = "sourdough bread oven"
    assert (await r.run_many([message, "invoices emailed monthly"], message=message)).weights == (1.0, 0.0)
    assert (await r.run_many([message, "x y"], weights=[1.0, 0.3])).weights == (1.0, 0.3)


async def test_the_messages_own_best_passages_keep_a_minority_of_the_prompts_places(app: Components, monkeypatch):
    """Even when a clearer expansion leads the fusion, the message's own top ``top_k // 2`` reach the prompt."""
    r = retriever(app)
    r.settings = r.settings.model_copy(update={"top_k": 2})  # one place kept for the message's best passage
    message, expansion = "sourdough bread oven", "invoices emailed monthly"
    monkeypatch.setattr("anaphora.retrieval.hybrid.head_margin", lambda dense: 0.3 if "invoices" in str(dense) else 0.1)
    monkeypatch.setattr(
        "anaphora.retrieval.hybrid.query_weights", lambda margins, prior, *, message=None: [1.0, 0.0]
    )  # the expansion alone decides the order
    own = await r.run(message)
    lead_only = await r.run_many([expansion, message], weights=[1.0, 0.0])
    assert own[0].id not in [p.id for p in lead_only[:2]]
    fused = await r.run_many([expansion, message], message=message)
    assert [p.id for p in fused[:2]] == [lead_only[0].id, own[0].id]
    assert_sorted(fused)
    assert len(fused) == len(lead_only) and len({p.id for p in fused}) == len(fused)


async def test_the_peers_bench_meter_sees_every_search(app: Components, monkeypatch: pytest.MonkeyPatch):
    """bench/peers/run.py's framework time is total - model - what this meter saw: a search path it missed (run_many,
    a follow-up's expansion + message) was once counted as framework overhead."""
    spec = importlib.util.spec_from_file_location("peers_adapters", ROOT / "bench" / "peers" / "adapters.py")
    assert spec is not None and spec.loader is not None
    adapters = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, adapters)  # its dataclasses look their module up there
    spec.loader.exec_module(adapters)
    r = retriever(app)
    meter = adapters.MeteredRetriever(r)
    await r.run("zanzibar installation")
    await r.run_many(["zanzibar installation", "sourdough bread"], message="sourdough bread")
    assert meter.log.calls == 3
    assert meter.log.inputs == ["zanzibar installation", "zanzibar installation", "sourdough bread"]
    assert meter.log.ms > 0
