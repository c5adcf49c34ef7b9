"""PassageSelector: the similarity floor, reranking with its own floor, and failing open on reranker trouble."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from anaphora.answering.select import PassageSelector, Selection
from anaphora.metrics import Metrics
from anaphora.pipeline.query import QueryPlan
from anaphora.pipeline.stages import Select
from anaphora.rerank.base import NoModelReranker, Reranker
from anaphora.testing.stages import run_stage, turn_state
from anaphora.types import Passage

pytestmark = pytest.mark.unit


def passage(pid: str, dense: float | None, score: float = 0.0) -> Passage:
    return Passage(id=pid, text=f"text of {pid}", score=score, dense_score=dense)


CANDIDATES = [
    passage("a", 0.80, 0.05),
    passage("b", 0.10, 0.04),  # below a 0.30 floor
    passage("c", None, 0.03),  # BM25-only: no dense score, the floor cannot apply
    passage("d", 0.30, 0.02),  # exactly at the floor: kept
    passage("e", 0.29, 0.01),  # just below
]


class Scripted:
    """A reranker that returns scores looked up by passage text, and records what it was asked."""

    name = "scripted"
    calls_model = True

    def __init__(self, scores: dict[str, float], *, delay_s: float = 0.0, error: Exception | None = None) -> None:
        self.scores = scores
        self.delay_s = delay_s
        self.error = error
        self.calls: list[tuple[str, list[str]]] = []

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error:
            raise self.error
        return [self.scores[t.removeprefix("text of ")] for t in texts]

    async def aclose(self) -> None:
        return None


async def select(
    selector: PassageSelector,
    candidates: Sequence[Passage],
    metrics: Metrics | None = None,
    query: str = "q",
    message: str | None = None,
) -> Selection:
    """Select as the engine does: in the select stage, observed and failing open. ``message``: the user's own
    words, when the retrieval query says more (default: the query)."""
    state = turn_state(message or query, plan=QueryPlan(query, "question"), candidates=tuple(candidates))
    after, record = await run_stage(Select(selector, top_k=100), state, metrics=metrics)
    assert record is not None
    return Selection(list(after.candidates), record.status, record.detail)


def ids(passages: Sequence[Passage]) -> list[str]:
    return [p.id for p in passages]


def test_scripted_reranker_satisfies_the_protocol() -> None:
    assert isinstance(Scripted({}), Reranker)
    assert isinstance(NoModelReranker(), Reranker)


async def test_similarity_floor_drops_low_dense_scores_and_keeps_unscored() -> None:
    selection = await select(PassageSelector(NoModelReranker(), similarity_threshold=0.30), CANDIDATES)
    assert ids(selection.passages) == ["a", "c", "d"]
    assert selection.status == "skipped"
    assert "2 below similarity 0.3" in selection.detail


async def test_no_model_reranker_keeps_first_stage_order_untouched() -> None:
    metrics = Metrics()
    selector = PassageSelector(NoModelReranker(), similarity_threshold=-1.0)
    selection = await select(selector, CANDIDATES, metrics)
    assert selection.passages == CANDIDATES  # same order, same objects' values, no rerank scores
    assert all(p.rerank_score is None for p in selection.passages)
    assert selection.status == "skipped"
    assert selection.detail == "first-stage order"
    # the no-model path is counted as a skipped rerank, never as an attempt
    assert metrics.value("anaphora_reranker_requests_total", status="skipped") == 1
    for status in ("ok", "error", "timeout"):
        assert metrics.value("anaphora_reranker_requests_total", status=status) == 0


async def test_everything_below_the_floor_leaves_nothing_and_calls_no_reranker() -> None:
    reranker = Scripted({})
    selection = await select(PassageSelector(reranker, similarity_threshold=0.95), CANDIDATES[:2])
    assert selection.passages == []
    assert selection.status == "skipped"
    assert reranker.calls == []


async def test_reranker_reorders_sets_scores_and_applies_its_floor() -> None:
    metrics = Metrics()
    reranker = Scripted({"a": 0.2, "c": 0.9, "d": 0.5})
    selector = PassageSelector(reranker, similarity_threshold=0.30, rerank_threshold=0.30)
    selection = await select(selector, CANDIDATES, metrics, query="the query")
    # only the survivors of the similarity floor are sent, in first-stage order, with the query
    assert reranker.calls == [("the query", ["text of a", "text of c", "text of d"])]
    assert ids(selection.passages) == ["c", "d"]  # best first; "a" fell below the rerank floor
    assert [p.rerank_score for p in selection.passages] == [0.9, 0.5]
    # first-stage scores are kept alongside
    assert [p.dense_score for p in selection.passages] == [None, 0.30]
    assert selection.status == "ok"
    assert "2 below similarity 0.3" in selection.detail and "1 below rerank 0.3" in selection.detail
    assert metrics.value("anaphora_reranker_requests_total", status="ok") == 1
    # the inputs are not mutated
    assert all(p.rerank_score is None for p in CANDIDATES)


async def test_reranker_detail_names_it_when_nothing_was_dropped() -> None:
    reranker = Scripted({"a": 0.4, "c": 0.6})
    selection = await select(PassageSelector(reranker, similarity_threshold=0.0), [CANDIDATES[0], CANDIDATES[2]])
    assert ids(selection.passages) == ["c", "a"]
    assert selection.detail == "reranked by scripted"


async def test_rerank_threshold_is_inclusive_and_can_drop_everything() -> None:
    reranker = Scripted({"a": 0.30, "c": 0.29999})
    selector = PassageSelector(reranker, similarity_threshold=0.0, rerank_threshold=0.30)
    selection = await selector.run("q", [CANDIDATES[0], CANDIDATES[2]])
    assert ids(selection.passages) == ["a"]
    selection = await PassageSelector(Scripted({"a": 0.1, "c": 0.1}), rerank_threshold=0.5).run(
        "q", [CANDIDATES[0], CANDIDATES[2]]
    )
    assert selection.passages == [] and selection.status == "ok"


async def test_equal_rerank_scores_keep_first_stage_order() -> None:
    reranker = Scripted({"a": 0.5, "c": 0.5, "d": 0.5})
    selection = await select(PassageSelector(reranker, similarity_threshold=0.3), CANDIDATES)
    assert ids(selection.passages) == ["a", "c", "d"]


async def test_reranker_error_fails_open_in_first_stage_order() -> None:
    metrics = Metrics()
    reranker = Scripted({}, error=RuntimeError("boom"))
    selection = await select(PassageSelector(reranker, similarity_threshold=0.30), CANDIDATES, metrics)
    assert ids(selection.passages) == ["a", "c", "d"]
    assert all(p.rerank_score is None for p in selection.passages)
    assert selection.status == "error"
    assert "RuntimeError: boom" in selection.detail and "first-stage order" in selection.detail
    assert metrics.value("anaphora_reranker_requests_total", status="error") == 1
    assert metrics.value("anaphora_reranker_requests_total", status="ok") == 0


async def test_wrong_number_of_scores_counts_as_an_error() -> None:
    class Short:
        name = "short"
        calls_model = True

        async def score(self, query: str, texts: Sequence[str]) -> list[float]:
            return [0.9]

        async def aclose(self) -> None:
            return None

    selection = await select(PassageSelector(Short(), similarity_threshold=0.0), CANDIDATES[:3])
    assert selection.status == "error"
    assert ids(selection.passages) == ["a", "b", "c"]


async def test_slow_reranker_times_out_and_keeps_first_stage_order() -> None:
    metrics = Metrics()
    reranker = Scripted({"a": 1.0, "c": 1.0, "d": 1.0}, delay_s=5.0)
    selector = PassageSelector(reranker, similarity_threshold=0.30, timeout_s=0.05)
    started = asyncio.get_running_loop().time()
    selection = await select(selector, CANDIDATES, metrics)
    assert asyncio.get_running_loop().time() - started < 2.0
    assert selection.status == "timeout"
    assert ids(selection.passages) == ["a", "c", "d"]
    assert "0.05s" in selection.detail
    assert metrics.value("anaphora_reranker_requests_total", status="timeout") == 1


async def test_metrics_count_each_outcome() -> None:
    metrics = Metrics()
    ok = PassageSelector(Scripted({"a": 0.9}), similarity_threshold=0.0)
    bad = PassageSelector(Scripted({}, error=ValueError("x")), similarity_threshold=0.0)
    for _ in range(3):
        await select(ok, CANDIDATES[:1], metrics)
    await select(bad, CANDIDATES[:1], metrics)
    assert metrics.value("anaphora_reranker_requests_total", status="ok") == 3
    assert metrics.value("anaphora_reranker_requests_total", status="error") == 1


async def test_without_metrics_nothing_is_counted_and_nothing_breaks() -> None:
    selection = await select(PassageSelector(Scripted({"a": 0.9})), CANDIDATES[:1])
    assert selection.status == "ok"


def test_the_select_stage_keeps_a_time_budget_only_for_a_reranker_that_calls_a_model() -> None:
    """The null reranker answers at once: no deadline is entered for it on every turn (a declared capability,
    not a type check)."""
    assert Select(PassageSelector(NoModelReranker(), timeout_s=2.0), top_k=5).timeout_s is None
    assert Select(PassageSelector(Scripted({}), timeout_s=2.0), top_k=5).timeout_s == 2.0


OPTION_ROWS = (
    "| Key | Description | Default |\n|---|---|---|\n| `trace_output` | Print all Elasticsearch API request payloads. "
    "| `Off` |\n| `port` | TCP port of the target Elasticsearch instance. | `9200` |"
)
GET_STARTED = "To insert records into an Elasticsearch service, run the plugin from the command line."


def test_a_table_the_query_does_not_name_a_key_of_goes_after_the_prose() -> None:
    """Fluent Bit docs: twelve chunks of the Elasticsearch output's option table took the top 5 for "How do I send
    logs to Elasticsearch?" (the product's name is in every row); its "Get started" paragraph ranked below them."""
    rows = Passage(id="es.md#12", text=OPTION_ROWS, score=1.48, dense_score=0.67)
    prose = Passage(id="es.md#16", text=GET_STARTED, score=0.83, dense_score=0.59)
    selector = PassageSelector(NoModelReranker())
    chosen = asyncio.run(select(selector, [rows, prose], query="How do I send logs to Elasticsearch?"))
    assert [p.id for p in chosen.passages] == ["es.md#16", "es.md#12"]
    # a question that names a key (or a part of one) asks the table
    for query in ("which port does the elasticsearch output use?", "how do I turn on trace_output?"):
        chosen = asyncio.run(select(selector, [rows, prose], query=query))
        assert [p.id for p in chosen.passages] == ["es.md#12", "es.md#16"], query


CHANGELOG_LINE = "Tasks with a countdown are now re-sent when the visibility timeout expires (Issue #1234)."
EXPLAINED = "If a task is not acknowledged within the visibility timeout, it is redelivered to another worker."


@pytest.mark.parametrize("source", ["history/changelog-3.0.rst", "release-notes/v3-2.md", "docs/changes.rst"])
def test_release_notes_go_after_the_page_that_explains_it_unless_the_message_asks_about_changes(source) -> None:
    """A how-to question matches an old changelog line about its feature as well as the page that explains it
    today (Celery's history/ pages filled the top 5 for "some of our countdown tasks run twice")."""
    notes = Passage(id=f"{source}#4", text=CHANGELOG_LINE, source=source, score=1.2, dense_score=0.6)
    guide = Passage(id="redis.rst#7", text=EXPLAINED, source="getting-started/redis.rst", score=0.9, dense_score=0.55)
    selector = PassageSelector(NoModelReranker())
    asked = "some of our tasks with a countdown run two or three times. why?"
    # the retrieval query carries a stated fact with a version; the user's own words decide
    chosen = asyncio.run(select(selector, [notes, guide], query=f"{asked} is on celery 5.4", message=asked))
    assert ids(chosen.passages) == ["redis.rst#7", f"{source}#4"]
    for message in ("what changed about countdown tasks in 5.4?", "was this fixed in a later release?"):
        chosen = asyncio.run(select(selector, [notes, guide], query=message))
        assert ids(chosen.passages) == [f"{source}#4", "redis.rst#7"], message
