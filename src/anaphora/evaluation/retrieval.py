"""Replay tasks through the real turn pipeline's retrieval half and score what it retrieved."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from anaphora.evaluation.baselines import AllQuestionsQuery, FixedQuery
from anaphora.evaluation.metrics import ndcg_at, recall_at
from anaphora.evaluation.retrieval_half import RetrievalHalf
from anaphora.evaluation.tasks import Task
from anaphora.pipeline.query import QueryStage
from anaphora.sanitize import sanitize
from anaphora.types import Message

QUERY_SOURCES = ("pipeline", "last-turn", "reference-rewrite", "all-questions")
RANKED_DEPTH = 10


def query_stage_for(source: str, task: Task) -> QueryStage | None:
    """``None`` means the pipeline's own query stage."""
    if source == "pipeline":
        return None
    if source == "last-turn":
        return FixedQuery(task.last_turn or task.question, "last-turn")
    if source == "reference-rewrite":
        return FixedQuery(task.reference_rewrite or task.question, "reference-rewrite")
    if source == "all-questions":
        return AllQuestionsQuery()
    raise ValueError(f"unknown query source {source!r}; use one of {', '.join(QUERY_SOURCES)}")


async def replay(
    half: RetrievalHalf, tasks: Sequence[Task], source: str, progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """One record per task with what was sent to retrieval and what came back (top 10 with scores); ``half``:
    the retrieval stages (:func:`~anaphora.evaluation.retrieval_half.retrieval_half`), their query strategy
    replaced by the baseline ``source`` names."""
    records = []
    for number, task in enumerate(tasks, start=1):
        history = [Message(role=m.role, content=sanitize(m.content)) for m in task.history]
        baseline = query_stage_for(source, task)
        stages = half if baseline is None else half.with_query(baseline)
        candidates, trace = await stages.run(sanitize(task.question).strip(), history)
        query_stage = trace.stage("query")
        records.append(
            {
                "task_id": task.task_id,
                "turn": task.turn_number,
                "multi_turn": task.multi_turn,
                "question": task.question,
                "query": trace.query,
                "query_source": trace.query_source,
                "route": trace.route,
                "skipped": trace.retrieval_skipped,
                "ranked": [{"id": p.id, "score": round(p.score, 6)} for p in candidates[:RANKED_DEPTH]],
                "model_calls": trace.model_calls,
                "timings_ms": trace.timings_ms,
                "rewrite_status": query_stage.status if query_stage else None,
                "rewrite_detail": query_stage.detail if query_stage else "",
                "gold": task.gold,
            }
        )
        if progress:
            progress(number, len(tasks))
    return records


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if not math.isnan(v)]
    return round(statistics.fmean(values), 4) if values else None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def score(records: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Recall@k and nDCG@k per group (all, turn 1, follow-ups, each multi_turn label), plus run statistics.

    A skipped retrieval counts as an empty ranking (recall 0) on tasks that have gold passages.
    """
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if not record["gold"]:
            continue
        groups["all"].append(record)
        groups["turn 1" if record["turn"] == 1 else "follow-ups"].append(record)
        for label in record["multi_turn"]:
            groups[f"multi_turn={label}"].append(record)
    table: dict[str, dict[str, float | int | None]] = {}
    for name in ("all", "turn 1", "follow-ups", *sorted(g for g in groups if g.startswith("multi_turn="))):
        members = groups.get(name, [])
        row: dict[str, float | int | None] = {"n": len(members)}
        for k in ks:
            row[f"recall@{k}"] = _mean([recall_at([r["id"] for r in m["ranked"]], m["gold"], k) for m in members])
            row[f"ndcg@{k}"] = _mean([ndcg_at([r["id"] for r in m["ranked"]], m["gold"], k) for m in members])
        table[name] = row
    stages: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for stage, ms in record["timings_ms"].items():
            stages[stage].append(ms)
    return {
        "tasks": len(records),
        "metrics": table,
        "retrievals_skipped": sum(1 for r in records if r["skipped"]),
        "model_calls_per_turn": round(statistics.fmean(r["model_calls"] for r in records), 3) if records else 0,
        "model_calls_turn_1": round(statistics.fmean(r["model_calls"] for r in records if r["turn"] == 1), 3)
        if any(r["turn"] == 1 for r in records)
        else None,
        "stage_ms": {
            s: {"p50": round(_percentile(v, 50), 3), "p95": round(_percentile(v, 95), 3)} for s, v in stages.items()
        },
        "rewrite_status": dict(Counter(r["rewrite_status"] for r in records)),
    }
