"""Follow-up retrieval on the MTRAG dev domains, every query source through the same retriever, in one process.

    python bench/followups.py [--domains clapnq,fiqa] [--sources last-turn,reference-rewrite,expansion,pipeline]
                              [--limit N] [--sweep] [--fresh-model]

Sources: last-turn and reference-rewrite bypass the query stage (baselines); ``expansion`` is the model-free
history-aware query alone; ``model-rewrite`` the SmolLM2 rewrite + guard + expansion fallback; ``pipeline`` is the
default query stage (for the embedded model, the expansion since issue 23).
``--sweep`` also compares retriever configurations (BM25, dense, RRF weights) on last-turn queries.
Indexes are cached in bench/.cache/<domain>; results go to bench/results/followups.json.

Robustness: each source's follow-up Recall@5 against last-turn's on the same tasks, per domain and per ``multi_turn``
label, with a paired bootstrap 95% interval and the harmed / helped shares (anaphora.evaluation.robustness).

Each run keeps its per-task records in bench/.cache/records-<domain>-<precision>.json (``ANAPHORA_EMBEDDER_PRECISION``
picks the precision); bench/precision_gate.py compares the int8 run's with the fp32 run's.

The embedded model answers at temperature 0, so its replies are recorded once per distinct prompt in
bench/.cache/model-replies.jsonl and replayed on later runs (query-stage timings of a replayed run are therefore not
model latencies; the report says how many replies were replayed). ``--fresh-model`` calls the model every time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, write_result
from replay_cache import ReplayingModel

from anaphora import Settings
from anaphora.app import build_components, build_query_stage
from anaphora.embeddings.onnx_runtime import resolve_precision
from anaphora.evaluation import load_tasks, replay, retrieval_half, score
from anaphora.evaluation.robustness import compare
from anaphora.models import load_chat_model

KS = (1, 3, 5, 10)


def embedder_precision() -> str:
    """The precision the embedder runs at (``auto`` resolved)."""
    settings = Settings()
    models = settings.models
    return resolve_precision(models.embedder_precision, models.embedder_runtime, settings.cache_dir)


REWRITERS = {"expansion": "expansion", "model-rewrite": "model"}  # sources that pin the query stage
SWEEP = {
    "bm25": {"fusion": "bm25"},
    "dense": {"fusion": "dense"},
    "rrf 1:1": {"fusion": "rrf", "bm25_weight": 1.0, "dense_weight": 1.0},
    "rrf dense 1 : bm25 0.5": {"fusion": "rrf", "bm25_weight": 0.5, "dense_weight": 1.0},
    "rrf dense 1 : bm25 0.3": {"fusion": "rrf", "bm25_weight": 0.3, "dense_weight": 1.0},
}


def follow_up_row(report: dict) -> dict:
    row = report["metrics"]["follow-ups"]
    return {
        "n": row["n"],
        "recall@5": row["recall@5"],
        "ndcg@5": row["ndcg@5"],
        "recall@10": row["recall@10"],
        "all_recall@5": report["metrics"]["all"]["recall@5"],
        "model_calls_per_turn": report["model_calls_per_turn"],
        "rewrite_status": report["rewrite_status"],
        "query_ms_p50": report["stage_ms"].get("query", {}).get("p50"),
        "retrieve_ms_p50": report["stage_ms"].get("retrieve", {}).get("p50"),
    }


def keep_records(domain: str, precision: str, records_of: dict[str, list[dict]]) -> None:
    """This run's per-task records beside the index, for bench/precision_gate.py (sources of earlier runs kept)."""
    stored = CACHE / f"records-{domain}-{precision}.json"
    kept = json.loads(stored.read_text()) if stored.is_file() else {}
    stored.write_text(json.dumps({**kept, **records_of}))


async def run_domain(domain: str, sources: list[str], limit: int | None, sweep: bool, fresh_model: bool) -> dict:
    corpus, tasks_path = domain_paths(domain)
    precision = embedder_precision()  # ANAPHORA_EMBEDDER_PRECISION: an index of its own per precision
    settings = Settings(data_dir=CACHE / (domain if precision == "fp32" else f"{domain}-{precision}"))
    model = load_chat_model(settings.models)
    replaying = None if fresh_model else ReplayingModel(model, CACHE / "model-replies.jsonl")
    components = build_components(settings, model=replaying or model)
    components.ingestor.run([corpus])
    tasks = load_tasks(tasks_path, limit=limit)
    half = retrieval_half(components)
    results: dict[str, dict] = {"sources": {}, "sweep": {}, "robustness": {}}
    records_of: dict[str, list[dict]] = {}
    for source in sources:
        started = time.perf_counter()
        if source in REWRITERS:  # that query stage as the app builds it, corpus statistics included
            rewriter = build_query_stage(
                settings.retrieval.model_copy(update={"rewriter": REWRITERS[source]}),
                components.chat_model,
                components.passages.term_statistics,
            )
            records = await replay(half.with_query(rewriter), tasks, "pipeline")
        else:
            records = await replay(half, tasks, source)
        records_of[source] = records
        report = score(records, KS)
        results["sources"][source] = {**follow_up_row(report), "seconds": round(time.perf_counter() - started, 1)}
        print(domain, source, json.dumps(results["sources"][source]), flush=True)
    if "last-turn" in records_of:
        for source, records in records_of.items():
            if source != "last-turn":
                results["robustness"][source] = compare(records, records_of["last-turn"], k=5)
                print(domain, "robustness", source, json.dumps(results["robustness"][source]), flush=True)
    keep_records(domain, precision, records_of)
    if replaying is not None:
        results["model_replies"] = {"replayed": replaying.hits, "called": replaying.misses}
    if sweep:
        retriever = components.retriever
        for label, overrides in SWEEP.items():
            retriever.settings = settings.retrieval.model_copy(update=overrides)
            report = score(await replay(half, tasks, "last-turn"), KS)
            results["sweep"][label] = follow_up_row(report)
            print(domain, "sweep", label, json.dumps(results["sweep"][label]), flush=True)
        retriever.settings = settings.retrieval
    components.database.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--sources", default="last-turn,reference-rewrite,expansion,model-rewrite,pipeline")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--fresh-model", action="store_true", help="call the model instead of replaying its replies")
    parser.add_argument("--name", default=None, help="results file (default: followups, followups-<precision>)")
    args = parser.parse_args()
    output = {"date": date.today().isoformat(), "revision": git_revision(), "machine": machine(), "domains": {}}
    for domain in args.domains.split(","):
        output["domains"][domain] = asyncio.run(
            run_domain(domain, args.sources.split(","), args.limit, args.sweep, args.fresh_model)
        )
    output["embedder_precision"] = embedder_precision()
    name = args.name or (
        "followups" if output["embedder_precision"] == "fp32" else f"followups-{output['embedder_precision']}"
    )
    print(f"wrote {write_result(name, output)}")


if __name__ == "__main__":
    main()
