"""Route, skip and query of every dev turn through the router, query and skip-gate stages, for comparing two code
versions (issue 22: the route decided in one place must skip exactly what it skipped before).

    PYTHONHASHSEED=0 PYTHONPATH=OLD/src python bench/route_equivalence.py expansion|analysis > old.jsonl
    PYTHONHASHSEED=0 PYTHONPATH=src     python bench/route_equivalence.py expansion|analysis > new.jsonl
    python bench/route_equivalence.py --compare old.jsonl new.jsonl

(A fixed hash seed: without corpus statistics, as here, the history expansion's choice among equally ranked words
can follow set order, so about one query in 900 differs between two runs of the same code.)

``expansion`` is the default query stage; ``analysis`` the structured model analysis, with a scripted model whose
verdict (kind of turn, "already answered") is a hash of the message, so every kind and verdict occurs. Turns: the
MTRAG dev conversations (clapnq, fiqa) and the CAsT dev ones, with their histories. No index: the stages that
decide are the ones compared.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import Counter
from pathlib import Path

from common import SHARED_BENCH

from anaphora import FakeChatModel
from anaphora.evaluation import RetrievalHalf
from anaphora.pipeline.rewrite import JSON_ANALYSIS, GuardedRewriter, HistoryExpansion
from anaphora.pipeline.stages import QueryPlanner, Router, SkipGate
from anaphora.types import Message

KINDS = ["follow_up", "new_query", "chit_chat", "meta"]
TASKS = [SHARED_BENCH / "clapnq" / "tasks.jsonl", SHARED_BENCH / "fiqa" / "tasks.jsonl"]
TASKS.append(SHARED_BENCH.parent / "cast-dev" / "tasks.jsonl")


def scripted(messages: list[Message]) -> str:
    last = messages[-1].content.rsplit("Last message: ", 1)[-1]
    h = int(hashlib.sha256(last.encode()).hexdigest(), 16)
    return json.dumps({"kind": KINDS[h % 4], "answered_by_conversation": h // 4 % 3 == 0, "query": last[:200]})


async def decide(mode: str) -> None:
    if mode == "analysis":
        strategy = GuardedRewriter(FakeChatModel(default=scripted), style=JSON_ANALYSIS, fallback=HistoryExpansion())
    else:
        strategy = HistoryExpansion()
    half = RetrievalHalf.of([Router(skip_gate=True), QueryPlanner(strategy), SkipGate()])
    for path in TASKS:
        for line in path.read_text().splitlines():
            task = json.loads(line)
            history = [Message(role=m["role"], content=m["content"]) for m in task["history"]]
            _, trace = await half.run(task["question"], history)
            row = [task["task_id"], trace.route, trace.route_reason, trace.retrieval_skipped, trace.query]
            print(json.dumps(row))


def compare(old_path: Path, new_path: Path) -> None:
    old = [json.loads(line) for line in old_path.read_text().splitlines()]
    new = [json.loads(line) for line in new_path.read_text().splitlines()]
    assert old and [o[0] for o in old] == [n[0] for n in new], "not the same turns"
    pairs = list(zip(old, new, strict=True))
    skipped = [(o, n) for o, n in pairs if o[3] or n[3]]
    print(f"{len(pairs)} turns, {sum(n[3] for _, n in pairs)} skipped")
    print(f"skip decision differs: {sum(o[3] != n[3] for o, n in pairs)}")
    print(f"skip reason differs (skipped turns): {sum(o[2] != n[2] for o, n in skipped)}")
    print(f"query differs: {sum(o[4] != n[4] for o, n in pairs)}")
    print(f"route label differs: {Counter((o[1], n[1]) for o, n in pairs if o[1] != n[1]).most_common()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=["expansion", "analysis"])
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        asyncio.run(decide(args.mode or "expansion"))


if __name__ == "__main__":
    main()
