"""Chat latency while the search indexes rebuild (issue 51): the warm p99, then the p99 during and right after an
upload into a ~30k-passage corpus, and right after a document delete.

    python bench/index_rebuild.py [--passages 30000] [--warm-s 20] [--after-s 8] [--delete-s 20] [--clients 2]

Builds a data dir holding --passages synthetic passages (sentences of words drawn from a fixed vocabulary, so BM25
has real postings and HNSW a real graph) with vectors from the hashing embedder: the bundled MiniLM would take
about a quarter of an hour to embed 30k passages on two cores, and what is measured here, the rebuild of BM25 and of
the HNSW graph from the stored passages and vectors, costs the same whichever embedder made the vectors. The
indexes are built once before the service starts, as a running service has them. The service (fake chat model,
auth none) runs in a child process, so the client does not share its GIL. --clients clients then ask questions
back to back through ``POST /v1/chat/completions``, in phases: --warm-s seconds for the warm figures; then one
Markdown file is uploaded (``POST /v1/documents``) and the turns are timed until its job is done ("during_upload":
the job writes the passages, then rebuilds) and for --after-s seconds after ("after_upload"); then the file is
deleted and turns are timed for --delete-s seconds ("after_delete": the first turn starts the rebuild in the
background) and on until that rebuild is done ("after_delete_until_rebuilt"); then --warm-s seconds again
("warm_again": what the machine gives with nothing rebuilding, at the end; on a shared machine its load moves).
Writes bench/results/index_rebuild.json. Before issue 51 the first turn after each change rebuilt
both indexes while every turn waited (18.8 s on a 37k-passage corpus).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import git_revision, machine, percentile, write_result
from load import free_port, wait_ready

from anaphora.app import build_components
from anaphora.settings import Settings
from anaphora.store.protocols import DocumentVersion
from anaphora.types import Chunk

BENCH = Path(__file__).resolve().parent
PASSAGES_PER_DOCUMENT = 10
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "ru", "so", "ta", "vu", "we", "zi") for b in range(200)]
UPLOAD = "# Zephyr rotation\n\nRotate the zephyr keys every ninety days with `zephyr rotate --all`.\n"


def overrides(data_dir: Path) -> dict:
    return {
        "data_dir": str(data_dir),
        "chat_model": "fake",
        "embedder": "hashing",
        "auth": "none",
        "similarity_threshold": 0.0,
        "max_concurrent_turns_per_user": 8,
    }


def sentence(rng: random.Random, words: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def build_corpus(data_dir: Path, passages: int, seed: int = 7) -> float:
    """Writes the synthetic corpus and builds its indexes; returns the seconds the index build took."""
    rng = random.Random(seed)
    components = build_components(Settings(**overrides(data_dir)))
    try:
        embedder = components.embedder.inner  # not through the cache: these texts are never asked again
        documents = []
        for number in range(max(1, passages // PASSAGES_PER_DOCUMENT)):
            source = f"doc-{number:05d}.md"
            chunks = [
                Chunk(id=f"{source}#{i}", text=sentence(rng), source=source, heading=f"Doc {number}", ordinal=i)
                for i in range(PASSAGES_PER_DOCUMENT)
            ]
            vectors = embedder.embed([f"{c.heading}\n{c.text}" for c in chunks])
            documents.append(DocumentVersion(str(data_dir / "synthetic"), source, f"{number:064x}", chunks, vectors))
            if len(documents) == 500:
                components.corpus.replace_documents(documents, embedder.name)
                documents = []
        components.corpus.replace_documents(documents, embedder.name)
        started = time.perf_counter()
        components.passages.warm_up()
        return time.perf_counter() - started
    finally:
        components.database.close()


async def ask(http: httpx.AsyncClient, rng: random.Random, latencies: list[float]) -> None:
    question = f"What does {rng.choice(WORDS)} say about {rng.choice(WORDS)}?"
    started = time.perf_counter()
    reply = await http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": question}]})
    if reply.status_code != 200:
        raise SystemExit(f"a turn failed: {reply.status_code} {reply.text[:300]}")
    latencies.append((time.perf_counter() - started) * 1000)


async def chat_until(http: httpx.AsyncClient, clients: int, done, seed: int) -> list[float]:
    """Turns back to back from ``clients`` clients until ``done()`` is true; their latencies in ms."""
    latencies: list[float] = []

    async def client(number: int) -> None:
        rng = random.Random(seed * 100 + number)
        while not await done():
            await ask(http, rng, latencies)

    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies


def figures(latencies: list[float]) -> dict:
    return {
        "turns": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(max(latencies), 1) if latencies else None,
    }


def deadline(seconds: float):
    end = time.monotonic() + seconds

    async def done() -> bool:
        return time.monotonic() >= end

    return done


async def rebuilding_after(http: httpx.AsyncClient, clients: int, empty: Path, limit_s: float = 900) -> list[float]:
    """Turns until the rebuild the delete started is done. The client cannot see it, but it can see a job: the
    ingestion of an empty folder writes nothing and ends by waiting for the rebuild in progress."""
    job_id = (await http.post("/v1/documents", json={"path": str(empty)})).json()["job_id"]
    end = time.monotonic() + limit_s

    async def done() -> bool:
        status = (await http.get(f"/v1/jobs/{job_id}")).json()["status"]
        return status in ("done", "failed") or time.monotonic() > end

    return await chat_until(http, clients, done, seed=6)


async def measure(base: str, args: argparse.Namespace, empty: Path) -> dict:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        await chat_until(http, args.clients, deadline(3), seed=1)  # warm-up, untimed
        warm = await chat_until(http, args.clients, deadline(args.warm_s), seed=2)
        upload = {"files": ("zephyr.md", UPLOAD.encode(), "text/markdown")}
        started = time.perf_counter()
        job_id = (await http.post("/v1/documents", files=upload)).json()["job_id"]

        async def job_done() -> bool:
            return (await http.get(f"/v1/jobs/{job_id}")).json()["status"] in ("done", "failed")

        during = await chat_until(http, args.clients, job_done, seed=3)
        job = (await http.get(f"/v1/jobs/{job_id}")).json()
        job_s = time.perf_counter() - started
        after = await chat_until(http, args.clients, deadline(args.after_s), seed=4)
        assert (await http.delete("/v1/documents/zephyr.md")).status_code == 200
        after_delete = await chat_until(http, args.clients, deadline(args.delete_s), seed=5)
        rebuilding = await rebuilding_after(http, args.clients, empty)
        settled = await chat_until(http, args.clients, deadline(args.warm_s), seed=7)
    warm_p99 = percentile(warm, 99)
    phases = {
        "warm": warm,
        "during_upload": during,
        "after_upload": after,
        "after_delete": after_delete,
        "after_delete_until_rebuilt": rebuilding,
        "warm_again": settled,
    }
    return {
        "job": {"status": job["status"], "seconds": round(job_s, 1), "chunks_written": job["report"]["chunks_written"]},
        **{name: figures(values) for name, values in phases.items()},
        "p99_over_warm_p99": {
            name: round(percentile(values, 99) / warm_p99, 2) for name, values in phases.items() if name != "warm"
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=30_000)
    parser.add_argument("--warm-s", type=float, default=20.0)
    parser.add_argument("--after-s", type=float, default=8.0)
    parser.add_argument("--delete-s", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anaphora-rebuild-") as folder:
        data_dir = Path(folder) / "data"
        build_s = build_corpus(data_dir, args.passages)
        print(f"corpus of {args.passages} passages; its indexes built in {build_s:.1f} s", flush=True)
        port = free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(BENCH)]))}
        serving = [sys.executable, str(BENCH / "load.py"), "--serve", json.dumps(overrides(data_dir)), str(port)]
        # bench/load.py's own child: the service alone, its access log discarded
        child = subprocess.Popen(serving, env=env, stdout=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(base, child))
            empty = Path(folder) / "empty"
            empty.mkdir()
            result = asyncio.run(measure(base, args, empty))
        finally:
            child.terminate()
            child.wait(30)
    payload = {
        "what": "chat latency while the search indexes rebuild after an upload and a delete (issue 51)",
        "command": "python bench/index_rebuild.py " + " ".join(sys.argv[1:]),
        "passages": args.passages,
        "embedder": "hashing (see the module docstring)",
        "clients": args.clients,
        "index_build_s": round(build_s, 1),
        **result,
        "machine": machine(),
        "revision": git_revision(),
    }
    print(payload)
    write_result("index_rebuild", payload)


if __name__ == "__main__":
    main()
