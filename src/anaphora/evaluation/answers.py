"""Full turns against reference answers: lexical overlap, citation validity, abstention by answerability."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Any

from anaphora.answering.citations import BRACKETED
from anaphora.evaluation.metrics import rouge_l_recall
from anaphora.evaluation.tasks import Task
from anaphora.pipeline.engine import Engine, TurnRequest

ABSTAIN = re.compile(
    r"\b(do(es)? not (cover|contain|mention|say)|don't (cover|contain|know)|could not find|cannot find|"
    r"no information|not (covered|mentioned)|unable to (find|answer))\b",
    re.IGNORECASE,
)


def abstained(answer: str) -> bool:
    return bool(ABSTAIN.search(answer))


def bracketed_references(answer: str) -> list[str]:
    return [
        part.strip() for group in BRACKETED.findall(answer) for part in re.split(r"\s*[,;]\s*", group) if part.strip()
    ]


async def replay_answers(engine: Engine, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    records = []
    for task in tasks:
        if task.answer is None:
            continue
        result = await engine.ask(TurnRequest(task.question, history=task.history))
        retrieved = {p.id for p in result.trace.retrieved}
        references = bracketed_references(result.answer)
        records.append(
            {
                "task_id": task.task_id,
                "turn": task.turn_number,
                "answerability": task.answerability,
                "answer": result.answer,
                "reference": task.answer,
                "rouge_l_recall": rouge_l_recall(task.answer, result.answer),
                "bracketed": references,
                "valid_citations": sum(1 for r in references if r in retrieved),
                "citations": [c.model_dump() for c in result.citations],
                "abstained": result.trace.abstained or abstained(result.answer),
                "model_calls": result.trace.model_calls,
                "timings_ms": result.trace.timings_ms,
            }
        )
    return records


def score_answers(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def rate(rows, key) -> float | None:
        return round(statistics.fmean(1.0 if r[key] else 0.0 for r in rows), 4) if rows else None

    answerable = [r for r in records if any(a in ("ANSWERABLE", "PARTIAL") for a in r["answerability"])]
    unanswerable = [r for r in records if "UNANSWERABLE" in r["answerability"]]
    bracketed = sum(len(r["bracketed"]) for r in records)
    return {
        "tasks": len(records),
        "rouge_l_recall": round(statistics.fmean(r["rouge_l_recall"] for r in records), 4) if records else None,
        "citation_validity": round(sum(r["valid_citations"] for r in records) / bracketed, 4) if bracketed else None,
        "answers_with_model_citation": rate(records, "bracketed"),
        "abstention_answerable": rate(answerable, "abstained"),
        "abstention_unanswerable": rate(unanswerable, "abstained"),
        "model_calls_per_turn": round(statistics.fmean(r["model_calls"] for r in records), 3) if records else None,
    }
