"""Entity boosting on the MTRAG dev domains: follow-up retrieval with the boost off and at several strengths, in one
process, through the same retriever and query stage.

    python bench/entity_boost.py [--domains clapnq,fiqa] [--strengths 0,0.05,0.1,0.2,0.3] [--limit N]

Query sources: ``last-turn`` (the message alone) and ``expansion`` (the model-free history-aware query, which is
also what the default model rewriter falls back to). Each strength is compared with strength 0 on the same tasks:
paired bootstrap interval and harmed / helped shares (anaphora.evaluation.robustness). The boost stage is added
to the retrieval stages (``RetrievalHalf.with_stage``) exactly where a turn would run it.
Results: bench/results/entity_boost.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, write_result
from followups import KS, follow_up_row

from anaphora import Settings
from anaphora.app import build_components, build_query_stage
from anaphora.evaluation import load_tasks, replay, retrieval_half, score
from anaphora.evaluation.robustness import compare
from anaphora.pipeline.stages import BoostEntities


async def run_domain(domain: str, strengths: list[float], limit: int | None) -> dict:
    corpus, tasks_path = domain_paths(domain)
    settings = Settings(data_dir=CACHE / domain, rewriter="expansion")
    components = build_components(settings)
    components.ingestor.run([corpus])
    tasks = load_tasks(tasks_path, limit=limit)
    half = retrieval_half(components).with_query(
        build_query_stage(settings.retrieval, components.chat_model, components.passages.term_statistics)
    )
    out: dict = {}
    for source in ("last-turn", "expansion"):
        replay_source = "pipeline" if source == "expansion" else source
        baseline = None
        rows = {}
        for strength in strengths:
            boost = BoostEntities(components.passages.term_statistics, strength)
            stages = half.with_stage(boost, after="retrieve") if strength > 0 else half
            records = await replay(stages, tasks, replay_source)
            row = follow_up_row(score(records, KS))
            if baseline is None:
                baseline = records
            else:
                row["against_off"] = compare(records, baseline, k=5)["follow-ups"]
            rows[str(strength)] = row
            print(domain, source, strength, json.dumps(row), flush=True)
        out[source] = rows
    components.database.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--strengths", default="0,0.05,0.1,0.2,0.3")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    strengths = [float(s) for s in args.strengths.split(",")]
    if strengths[0] != 0:
        strengths.insert(0, 0.0)
    output = {"date": date.today().isoformat(), "revision": git_revision(), "machine": machine(), "domains": {}}
    for domain in args.domains.split(","):
        output["domains"][domain] = asyncio.run(run_domain(domain, strengths, args.limit))
    print(f"wrote {write_result('entity_boost', output)}")


if __name__ == "__main__":
    main()
