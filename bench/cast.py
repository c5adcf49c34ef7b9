"""What the query stage resolves, against TREC CAsT 2019 human rewrites (no corpus): resolution recall,
preservation, unchanged-when-standalone.

    python bench/cast.py [--tasks ../shared/bench/cast-dev/tasks.jsonl] [--limit N] [--stats-domain clapnq]
                         [--fresh-model]

Stages: ``expansion`` (model-free; CAsT has no corpus here, so no corpus statistics filter its words),
``expansion + clapnq statistics`` (the same, with the document frequencies of the clapnq Wikipedia pool as a
stand-in for CAsT's Wikipedia/MS MARCO collection), ``model`` (SmolLM2 guarded rewrite, falling back to the plain
expansion) and ``default`` (what ``Settings()`` builds, with the stand-in statistics). The model's replies are
replayed from bench/.cache/model-replies.jsonl as in bench/followups.py. Results: bench/results/cast.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import date

from common import CACHE, ROOT, git_revision, machine, write_result
from replay_cache import ReplayingModel

from anaphora import Settings
from anaphora.app import build_components, build_query_stage
from anaphora.evaluation import load_tasks, replay_rewrites, score_rewrites
from anaphora.models import load_chat_model

DEFAULT_TASKS = ROOT.parent / "shared" / "bench" / "cast-dev" / "tasks.jsonl"


async def run(tasks_path: str, limit: int | None, stats_domain: str, fresh_model: bool) -> dict:
    tasks = load_tasks(tasks_path, limit=limit)
    settings = Settings(data_dir=CACHE / stats_domain)
    model = load_chat_model(settings.models)
    replaying = None if fresh_model else ReplayingModel(model, CACHE / "model-replies.jsonl")
    components = build_components(settings, model=replaying or model)
    statistics = components.passages.term_statistics
    stages = {
        "expansion": build_query_stage(settings.retrieval.model_copy(update={"rewriter": "expansion"}), model),
        f"expansion + {stats_domain} statistics": build_query_stage(
            settings.retrieval.model_copy(update={"rewriter": "expansion"}), model, statistics
        ),
        "model": build_query_stage(settings.retrieval.model_copy(update={"rewriter": "model"}), replaying or model),
        "default": components.stage_parts.query_stage,
    }
    out = {}
    for name, stage in stages.items():
        summary = score_rewrites(await replay_rewrites(stage, tasks))
        out[name] = summary
        print(name, json.dumps(summary), flush=True)
    components.database.close()
    if replaying is not None:
        out["model_replies"] = {"replayed": replaying.hits, "called": replaying.misses}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=str(DEFAULT_TASKS))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--stats-domain", default="clapnq")
    parser.add_argument("--fresh-model", action="store_true")
    args = parser.parse_args()
    stages = asyncio.run(run(args.tasks, args.limit, args.stats_domain, args.fresh_model))
    output = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "tasks": args.tasks,
        "limit": args.limit,
        "stages": stages,
    }
    print(f"wrote {write_result('cast', output)}")


if __name__ == "__main__":
    main()
