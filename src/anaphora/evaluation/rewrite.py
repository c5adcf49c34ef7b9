"""Rewrite fidelity against reference rewrites: resolution recall, preservation, unchanged-when-standalone."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from anaphora.evaluation.metrics import is_standalone_reference, jaccard, preservation, resolution_recall
from anaphora.evaluation.tasks import Task
from anaphora.pipeline.query import QueryStage
from anaphora.sanitize import sanitize
from anaphora.types import Message

UNCHANGED_JACCARD = 0.9


async def replay_rewrites(stage: QueryStage, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    records = []
    for task in tasks:
        reference = task.reference_rewrite
        if reference is None:
            continue
        history = [Message(role=m.role, content=sanitize(m.content)) for m in task.history]
        plan = await stage.run(sanitize(task.question).strip(), history)
        standalone = is_standalone_reference(task.question, reference)
        records.append(
            {
                "task_id": task.task_id,
                "turn": task.turn_number,
                "original": task.question,
                "reference": reference,
                "ours": plan.query,
                "source": plan.source,
                "status": plan.status,
                "verdict": plan.detail,
                "model_calls": plan.model_calls,
                "resolution_recall": resolution_recall(task.question, reference, plan.query),
                "preservation": preservation(task.question, plan.query),
                "standalone_reference": standalone,
                "unchanged": jaccard(task.question, plan.query) >= UNCHANGED_JACCARD if standalone else None,
            }
        )
    return records


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def score_rewrites(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    follow_ups = [r for r in records if r["turn"] > 1]
    return {
        "tasks": len(records),
        "resolution_recall": _mean(r["resolution_recall"] for r in records),
        "resolution_recall_follow_ups": _mean(r["resolution_recall"] for r in follow_ups),
        "preservation": _mean(r["preservation"] for r in records),
        "unchanged_when_standalone": _mean(r["unchanged"] for r in records),
        "standalone_turns": sum(1 for r in records if r["standalone_reference"]),
        "status": dict(Counter(r["status"] for r in records)),
        "model_calls_per_turn": _mean(r["model_calls"] for r in records),
    }
