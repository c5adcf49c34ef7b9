"""Ingest throughput and first-stage retrieval latency on an MTRAG dev corpus (default: clapnq).

    python bench/retrieval_latency.py [--domain clapnq] [--queries 300]

Ingests the corpus into bench/.cache/<domain> (cold: embeds every passage; then a warm re-ingest that must
skip everything), then times BM25-only, dense-only and hybrid retrieval for the task questions, in one process,
reporting p50/p95 and the ratio of hybrid to BM25-only as the in-process baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
import uuid
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, summary_ms, write_result

from anaphora import Settings
from anaphora.app import build_components


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", default="clapnq")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--fresh", action="store_true", help="delete the cached index first (cold ingest)")
    args = parser.parse_args()
    corpus_path, tasks_path = domain_paths(args.domain)
    data_dir = CACHE / args.domain
    if args.fresh:
        shutil.rmtree(data_dir, ignore_errors=True)
    settings = Settings(data_dir=data_dir, chat_model="fake")  # embedder: MiniLM on ONNX Runtime (the default)
    components = build_components(settings)
    passages = sum(1 for line in corpus_path.open() if line.strip())

    started = time.perf_counter()
    first = components.ingestor.run([corpus_path])
    ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    again = components.ingestor.run([corpus_path])
    reingest_s = time.perf_counter() - started
    assert again.chunks_written == 0, "re-ingest of an unchanged corpus must write nothing"

    started = time.perf_counter()
    components.retriever.warm_up()
    index_s = time.perf_counter() - started

    questions = [json.loads(line)["question"] for line in tasks_path.open() if line.strip()][: args.queries]
    retriever = components.retriever
    timings: dict[str, list[float]] = {}

    # the embedding cache persists across runs: a query that must be embedded carries a tag new to this run
    run_tag = f"r{uuid.uuid4().hex[:6]}"

    async def measure(fusion: str, label: str, tag: str = "") -> None:
        retriever.settings = settings.retrieval.model_copy(update={"fusion": fusion})
        samples = []
        for question in questions:
            t0 = time.perf_counter()
            await retriever.run(f"{question} {tag}" if tag else question)
            samples.append((time.perf_counter() - t0) * 1000)
        timings[label] = samples

    async def run_all() -> None:
        await measure("bm25", "bm25")
        await measure("dense", "dense (query embedding computed)", f"{run_tag}d")
        await measure("dense", "dense (query embedding cached)", f"{run_tag}d")
        await measure("rrf", "hybrid (query embedding computed)", f"{run_tag}h")
        await measure("rrf", "hybrid (query embedding cached)", f"{run_tag}h")

    asyncio.run(run_all())
    stats = {label: summary_ms(values) for label, values in timings.items()}
    bm25_p50 = stats["bm25"]["p50"]
    result = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "domain": args.domain,
        "passages": passages,
        "chunks": sum(d.chunk_count for d in components.corpus.documents()),
        "ingest": {
            "seconds": round(ingest_s, 2),
            "chunks_written": first.chunks_written,
            "passages_per_s": round(first.chunks_written / ingest_s, 1) if first.chunks_written else None,
            "reingest_unchanged_s": round(reingest_s, 3),
            "index_load_or_build_s": round(index_s, 3),
        },
        "latency_ms": stats,
        "ratio_to_bm25_p50": {label: round(s["p50"] / bm25_p50, 2) for label, s in stats.items()},
        "embedding_cache": {"hits": components.embedder.hits, "misses": components.embedder.misses},
    }
    path = write_result(f"retrieval_latency_{args.domain}", result)
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")
    components.database.close()


if __name__ == "__main__":
    main()
