"""LoCoMo dev memory evidence recall@10 of the memory stage with the fp32 and the int8 embedder, in one process.

    python bench/precision_memory.py [--data ../shared/bench/locomo-dev] [--limit N]

The same procedure as bench/memory.py's "memory stage" row (every session fed through the real writer into a fresh
SQLite memory store, each question asked through the real recall; evidence recall@k counts the recalled items'
source turns), once per precision, with a paired bootstrap 95% interval of int8 minus fp32 over the questions.
Writes bench/results/precision_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from datetime import date
from pathlib import Path

from common import SHARED_BENCH, git_revision, machine, write_result
from memory import evidence_recall, feed, load

from anaphora.app import limit_blas_threads
from anaphora.embeddings import CachedEmbedder, load_embedder
from anaphora.memory.recall import MemoryRecall
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.writer import TurnRecorder
from anaphora.settings import Settings
from anaphora.store import Database, SQLiteEmbeddingCache


async def recalls(precision: str, conversations: list[dict], questions: list[dict], limit: int) -> list[float]:
    """Evidence recall@10 per scored question (categories 1-4 with evidence), in question order."""
    settings = Settings(embedder="minilm", embedder_precision=precision)
    values: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        db = Database(Path(directory) / "memory.db")
        embedder = CachedEmbedder(load_embedder(settings), SQLiteEmbeddingCache(db, max_entries=1_000_000))
        store = SQLiteMemoryStore(db)
        recorder, recall = TurnRecorder(store, embedder), MemoryRecall(store, embedder)
        for sample in conversations:
            user = sample["sample_id"]
            dia, _, _ = await feed(recorder, sample)
            mine = [q for q in questions if q["sample_id"] == user and q["category"] != 5 and q.get("evidence")]
            for q in mine[:limit] if limit else mine:
                recalled = await recall.rank(user, q["question"])
                ranked = [dia[(r.item.conversation_id, t)] for r in recalled for t in r.item.turns]
                values.append(evidence_recall(ranked, q["evidence"], 10))
        db.close()
    return values


def paired_interval(a: list[float], b: list[float], rounds: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of mean(b - a) over paired questions."""
    rng = random.Random(0)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_BENCH.parent / "locomo-dev")
    parser.add_argument("--limit", type=int, default=0, help="questions per conversation (0: all)")
    args = parser.parse_args()
    limit_blas_threads(1)
    conversations, questions = load(args.data)
    fp32 = await recalls("fp32", conversations, questions, args.limit)
    int8 = await recalls("int8", conversations, questions, args.limit)
    low, high = paired_interval(fp32, int8)
    mean32, mean8 = statistics.fmean(fp32), statistics.fmean(int8)
    result = {
        "benchmark": "precision_memory",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": "python bench/precision_memory.py " + " ".join(sys.argv[1:]),
        "questions": len(fp32),
        "recall@10": {"fp32": round(mean32, 4), "int8": round(mean8, 4)},
        "relative_change": round(mean8 / mean32 - 1, 4) if mean32 else None,
        "int8_minus_fp32_95ci": [round(low, 4), round(high, 4)],
        "within_bounds": abs(mean8 / mean32 - 1) <= 0.01 or low <= 0 <= high,
    }
    print(json.dumps(result, indent=2))
    print(f"wrote {write_result('precision_memory', result)}")


if __name__ == "__main__":
    asyncio.run(main())
