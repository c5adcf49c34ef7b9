"""How long the operator's report takes as the range grows: synthetic turns in a SQLite store, then the report.

    python bench/report_scale.py [--turns 5000] [--distinct 1000] [--embedder minilm]

Appends --turns turns (users of 5 turns each, --distinct distinct searches, 1 in 10 refused, 1 in 20 voted down,
a trace shaped like the engine's) to a SQLite store in a temporary directory, then times ``TurnLog.logged_turns``
over the whole range and ``build_report`` with the given embedder (uncached, as ``anaphora report`` runs it),
its grouping (embedding + SciPy clustering of the distinct searches) timed on its own too. Writes
bench/results/report_scale_{embedder}.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from common import RESULTS

from anaphora.embeddings import load_embedder
from anaphora.report import ReportOptions, build_report
from anaphora.report.grouping import group
from anaphora.settings import Settings
from anaphora.store import Database, SQLiteConversationStore
from anaphora.types import Citation, Passage, TurnTrace

TOPICS = ["install", "upgrade", "configure", "back up", "monitor", "secure", "scale", "debug", "migrate", "tune"]
THINGS = ["Kestrel", "the agent", "the Helm chart", "TLS", "the collector", "retention", "ARM nodes", "the API"]


def search(n: int) -> str:
    return f"how do I {TOPICS[n % len(TOPICS)]} {THINGS[(n // 10) % len(THINGS)]} variant {n // 80}"


async def fill(store: SQLiteConversationStore, turns: int, distinct: int) -> None:
    for user in range(0, turns, 5):
        conversation = await store.create(f"user-{user}")
        for n in range(user, min(user + 5, turns)):
            refused = n % 10 == 9
            query = search(n % distinct)
            trace = TurnTrace(
                question=query,
                query=query,
                route="new_query",
                abstained=refused,
                answer_source="abstain" if refused else "extractive",
                retrieved=[]
                if refused
                else [Passage(id=f"p{n % 40}", text="t", source=f"page-{n % 40}.md", dense_score=0.6)],
            )
            cited = [] if refused else [Citation(id=f"p{n % 40}", source=f"page-{n % 40}.md")]
            turn = await store.append_turn(f"user-{user}", conversation.id, query, "answer", cited, trace)
            if n % 20 == 0:
                await store.rate(f"user-{user}", conversation.id, turn.index, "down", "not it")


async def measure(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        database = Database(Path(folder) / "anaphora.db")
        store = SQLiteConversationStore(database)
        await fill(store, args.turns, args.distinct)
        embedder = load_embedder(Settings(data_dir=folder, embedder=args.embedder))
        started = time.perf_counter()
        logged = await store.logged_turns(0, time.time() + 60)
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        grouping = group([search(n) for n in range(args.distinct)], embedder)
        group_s = time.perf_counter() - started
        started = time.perf_counter()
        report = await build_report(
            store, embedder, [f"page-{n}.md" for n in range(60)], 0, time.time() + 60, ReportOptions()
        )
        report_s = time.perf_counter() - started
        database.close()
    return {
        "turns": len(logged),
        "distinct_searches": args.distinct,
        "embedder": embedder.name,
        "read_all_turns_s": round(read_s, 3),
        "group_distinct_searches_s": round(group_s, 3),
        "topics": len(set(grouping.labels)),
        "report_s": round(report_s, 3),
        "gaps": len(report.gaps),
        "thumbs_down": len(report.thumbs_down),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--distinct", type=int, default=1000)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    (RESULTS / f"report_scale_{args.embedder}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
