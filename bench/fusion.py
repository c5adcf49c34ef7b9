"""Dense + BM25 fusion options on the MTRAG dev domains, and the choice by leave-one-domain-out.

    python bench/fusion.py [--domains clapnq,fiqa] [--queries last-turn,expansion] [--reuse]

Every option runs through the real retriever (only its settings change) on every task, with two query sources:
*last-turn* (the message alone) and *expansion* (the default model-free query stage). Reported: follow-up Recall@5
per domain, the worst domain, and the leave-one-domain-out table: for each domain held out, the option that is best
on the other domain(s) and what it scores on the held-out one. Options are chosen by the worst domain, never per
domain. Results go to bench/results/fusion.json; each domain's also to bench/.cache/fusion_<domain>.json, which
``--reuse`` reads instead of re-running that domain.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, write_result

from anaphora import Settings
from anaphora.app import build_components, build_query_stage
from anaphora.evaluation import load_tasks, replay, retrieval_half, score

OPTIONS: dict[str, dict] = {
    "dense only": {"fusion": "dense"},
    "bm25 only": {"fusion": "bm25"},
    **{
        f"rrf dense 1 : bm25 {w}": {"fusion": "rrf", "bm25_weight": w, "dense_weight": 1.0}
        for w in (0.1, 0.3, 0.5, 1.0)
    },
    **{
        f"combsum {norm} dense 1 : bm25 {w}": {
            "fusion": "combsum",
            "fusion_normalisation": norm,
            "bm25_weight": w,
            "dense_weight": 1.0,
        }
        for norm in ("zscore", "minmax")
        for w in (0.3, 0.5, 1.0)
    },
    **{
        f"combmnz {norm} 1 : 1": {"fusion": "combmnz", "fusion_normalisation": norm, "bm25_weight": 1.0}
        for norm in ("zscore", "minmax")
    },
}


async def run_domain(domain: str, sources: list[str]) -> dict:
    corpus, tasks_path = domain_paths(domain)
    settings = Settings(data_dir=CACHE / domain, chat_model="fake")
    components = build_components(settings)
    components.ingestor.run([corpus])
    tasks = load_tasks(tasks_path)
    half = retrieval_half(components).with_query(
        build_query_stage(
            settings.retrieval.model_copy(update={"rewriter": "expansion"}),
            components.chat_model,
            components.passages.term_statistics,
        )
    )
    out: dict[str, dict] = {}
    for label, overrides in OPTIONS.items():
        components.retriever.settings = settings.retrieval.model_copy(update=overrides)
        out[label] = {}
        for source in sources:
            report = score(await replay(half, tasks, "pipeline" if source == "expansion" else source), (5, 10))
            out[label][source] = {
                "recall@5": report["metrics"]["follow-ups"]["recall@5"],
                "ndcg@5": report["metrics"]["follow-ups"]["ndcg@5"],
                "all_recall@5": report["metrics"]["all"]["recall@5"],
            }
        print(domain, label, json.dumps(out[label]), flush=True)
    components.database.close()
    return out


def leave_one_out(results: dict[str, dict], source: str) -> list[dict]:
    rows = []
    domains = list(results)
    for held_out in domains:
        train = [d for d in domains if d != held_out]
        if not train:
            continue
        best = max(OPTIONS, key=lambda o: min(results[d][o][source]["recall@5"] for d in train))
        rows.append(
            {
                "held_out": held_out,
                "chosen_on": ",".join(train),
                "option": best,
                "train_recall@5": min(results[d][best][source]["recall@5"] for d in train),
                "held_out_recall@5": results[held_out][best][source]["recall@5"],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--queries", default="last-turn,expansion")
    parser.add_argument("--reuse", action="store_true", help="read a domain's results from an earlier run")
    args = parser.parse_args()
    sources = args.queries.split(",")
    parser_reuse = args.reuse
    results = {}
    for d in args.domains.split(","):
        cached = CACHE / f"fusion_{d}.json"
        if parser_reuse and cached.exists():
            results[d] = json.loads(cached.read_text())
        else:
            results[d] = asyncio.run(run_domain(d, sources))
            cached.write_text(json.dumps(results[d]))
    worst = {
        source: {o: min(results[d][o][source]["recall@5"] for d in results) for o in OPTIONS} for source in sources
    }
    output = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "options": OPTIONS,
        "domains": results,
        "worst_domain": worst,
        "leave_one_domain_out": {source: leave_one_out(results, source) for source in sources},
    }
    for source in sources:
        print(source, "best by worst domain:", max(worst[source], key=worst[source].get))
    print(f"wrote {write_result('fusion', output)}")


if __name__ == "__main__":
    main()
