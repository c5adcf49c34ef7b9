"""Grounded answers on the MTRAG dev domains: usefulness, faithfulness and risky tokens of every answer mode, with
one model instance, in one process.

    python bench/answers.py [--domains clapnq,fiqa] [--limit N] [--model embedded|fake|gguf:PATH]

Each task is answered once by the model with the check off (``raw``); the same turn state (the passages shown, the
question, the history) is then put through the answer-check stage in each mode, exactly as a turn would (the check
is deterministic given the answer and its sources). ``extractive`` runs the extractive answerer on the same state;
``lead-2`` is the first two sentences of the top shown passage; ``reference`` scores the human answers against the
gold passages (the metrics' noise floor). Results: bench/results/answers.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, summary_ms, write_result

from anaphora import Settings
from anaphora.answering.extractive import ExtractiveAnswerer
from anaphora.answering.support import split_units
from anaphora.app import build_components
from anaphora.evaluation import load_tasks
from anaphora.evaluation.metrics import k_precision, rouge_l_recall, unsupported_risky_tokens
from anaphora.pipeline.check import ABSTAIN, LEFT_OUT, AnswerCheck
from anaphora.pipeline.engine import TurnRequest
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from anaphora.sanitize import sanitize
from anaphora.testing.stages import run_stage
from anaphora.types import Message

SYSTEMS = ("raw", "drop", "mark", "auto", "extractive", "lead-2", "reference")
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


class Capture(Stage):
    """Keeps the turn's state after generation, for the offline modes."""

    name = "capture"
    reads = ("answer",)
    writes = ()

    def __init__(self) -> None:
        self.state: TurnState | None = None

    async def run(self, state: TurnState) -> StageResult:
        self.state = state
        return StageResult({}, "ok")


def lead(text: str, sentences: int = 2) -> str:
    units = [u.text for u in split_units(text) if u.text.strip()]
    return " ".join(units[:sentences])


def measures(answer: str, shown: list[str], sources: list[str], reference: str) -> dict:
    visible = answer.replace(LEFT_OUT, "").strip()
    abstained = visible == ABSTAIN
    kprec = None if abstained else k_precision(visible, shown)
    risky = [] if abstained else unsupported_risky_tokens(visible, sources)
    return {
        "rouge_l_recall": 0.0 if abstained else rouge_l_recall(reference, visible),
        "k_precision": kprec,
        "unsupported_risky": bool(risky),
        "bad": (not abstained) and ((kprec is not None and kprec < 0.75) or bool(risky)),
        "abstained": abstained,
        "words": len(visible.split()),
    }


def aggregate(rows: list[dict]) -> dict:
    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(statistics.fmean(values), 4) if values else None

    def share(key: str) -> float:
        return round(sum(1 for r in rows if r[key]) / len(rows), 4) if rows else 0.0

    return {
        "n": len(rows),
        "rouge_l_recall": mean("rouge_l_recall"),
        "k_precision": mean("k_precision"),
        "unsupported_risky_share": share("unsupported_risky"),
        "bad_share": share("bad"),
        "abstained_share": share("abstained"),
        "idk_score_answerable": round(1 - share("abstained"), 4),
        "words": mean("words"),
    }


async def answer_task(engine, capture: Capture, checks: dict[str, AnswerCheck], extractive, gold_texts, task) -> dict:
    history = [Message(role=m.role, content=sanitize(m.content)) for m in task.history]
    started = time.perf_counter()
    result = await engine.ask(TurnRequest(task.question, history=history))
    turn_ms = (time.perf_counter() - started) * 1000
    state = capture.state
    assert state is not None
    shown = [p.text for p in (state.prompt.passages if state.prompt else [])]
    conversation = [state.question, *(m.content for m in state.history)]
    outputs: dict[str, str] = {"raw": state.answer}
    ms: dict[str, float] = {"raw": turn_ms}
    for name, check in checks.items():
        started = time.perf_counter()
        after, _ = await run_stage(check, state)
        outputs[name] = after.answer
        ms[name] = turn_ms + (time.perf_counter() - started) * 1000
    before_answer = {s.name for s in engine.stages if s.retrieval} | {"budget"}
    retrieval_ms = sum(s.ms for s in result.trace.stages if s.name in before_answer)
    started = time.perf_counter()
    extract = await extractive.answer_turn(state.extract_request())
    outputs["extractive"] = extract.text if extract else ABSTAIN
    ms["extractive"] = retrieval_ms + (time.perf_counter() - started) * 1000
    outputs["lead-2"] = lead(shown[0]) if shown else ABSTAIN
    ms["lead-2"] = retrieval_ms
    # what the extractive answerer reads (not cut by the prompt budget), with the passages of the same pages it
    # quoted from, which the product adds to the turn's selection (so they are cited like the others)
    quoted = [p.text for p in (state.quote(extract)["selected"] if extract else state.selected)]
    record = {"task_id": task.task_id, "ms": ms, "outputs": outputs, "systems": {}}
    for name, text in outputs.items():
        knowledge = quoted if name == "extractive" else shown
        record["systems"][name] = measures(text, knowledge, [*knowledge, *conversation], task.answer)
    gold = [gold_texts[i] for i in task.gold or [] if i in gold_texts]
    record["systems"]["reference"] = measures(task.answer, gold, [*gold, *conversation], task.answer)
    record["model_calls"] = {
        "raw": result.trace.model_calls,
        "extractive": result.trace.model_calls - 1,
        "lead-2": result.trace.model_calls - 1,
    }
    record["state"] = state
    return record


async def threshold_curve(records: list[dict], extractive, threshold_values) -> dict:
    """The default mode (auto) at each support threshold, on the same raw answers."""
    curve = {}
    for threshold in threshold_values:
        check = AnswerCheck("drop", "auto", threshold, extractive)
        rows = []
        for record in records:
            state = record["state"]
            after, _ = await run_stage(check, state)
            knowledge = [
                p.text for p in (state.selected if after.answer_source == "extractive" else state.prompt.passages)
            ]
            conversation = [state.question, *(m.content for m in state.history)]
            rows.append(measures(after.answer, knowledge, [*knowledge, *conversation], record["reference"]))
        curve[str(threshold)] = aggregate(rows)
    return curve


async def run_domain(domain: str, limit: int, model: str) -> dict:
    corpus, tasks_path = domain_paths(domain)
    settings = Settings(data_dir=CACHE / domain, chat_model=model, answer_check="off", answer_mode="generate")
    components = build_components(settings)
    components.ingestor.run([corpus])
    gold_texts = {
        row["id"]: row["text"] for row in (json.loads(line) for line in corpus.read_text().splitlines() if line)
    }
    tasks = [t for t in load_tasks(tasks_path) if t.answer]
    tasks = tasks[:: max(1, len(tasks) // limit)][:limit]  # spread over the conversations
    engine = components.engine
    capture = Capture()
    engine.add_stage(capture, after="answer")
    extractive = ExtractiveAnswerer(components.embedder, min_relevance=settings.answers.extractive_min_relevance)
    threshold = Settings().answers.support_threshold
    checks = {
        "drop": AnswerCheck("drop", "generate", threshold, extractive),
        "mark": AnswerCheck("mark", "generate", threshold, extractive),
        "auto": AnswerCheck("drop", "auto", threshold, extractive),
    }
    records = []
    for number, task in enumerate(tasks, start=1):
        record = await answer_task(engine, capture, checks, extractive, gold_texts, task)
        record["reference"] = task.answer
        records.append(record)
        print(f"  {domain} {number}/{len(tasks)} {record['ms']['raw'] / 1000:.1f}s", flush=True)
    systems = {}
    for name in SYSTEMS:
        row = aggregate([r["systems"][name] for r in records])
        if name in records[0]["ms"]:
            row["turn_ms"] = summary_ms([r["ms"][name] for r in records])
        calls = [r["model_calls"].get(name, r["model_calls"]["raw"]) for r in records]
        row["model_calls_per_turn"] = round(statistics.fmean(calls), 3) if name != "reference" else None
        systems[name] = row
    curve = await threshold_curve(records, extractive, THRESHOLDS)
    await engine.aclose()
    examples = [
        {"task_id": r["task_id"], "question": r["state"].question, **{k: r["outputs"][k] for k in ("raw", "auto")}}
        for r in records[:5]
    ]
    return {"tasks": len(records), "systems": systems, "threshold_curve": curve, "examples": examples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--limit", type=int, default=30, help="tasks per domain, spread over its conversations")
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args()
    started = time.time()
    results = {}
    for domain in args.domains.split(","):
        results[domain] = asyncio.run(run_domain(domain, args.limit, args.model))
    payload = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "revision": git_revision(),
        "command": f"python bench/answers.py --domains {args.domains} --limit {args.limit} --model {args.model}",
        "seconds": round(time.time() - started),
        "results": results,
    }
    path = write_result("answers", payload)
    for domain, result in results.items():
        print(f"\n{domain} ({result['tasks']} tasks)")
        for name, row in result["systems"].items():
            print(
                f"  {name:10} rougeL-R {row['rouge_l_recall']}  k-prec {row['k_precision']}  "
                f"risky {row['unsupported_risky_share']}  bad {row['bad_share']}  idk {row['abstained_share']}  "
                f"p50 {row.get('turn_ms', {}).get('p50')} ms  calls {row['model_calls_per_turn']}"
            )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
