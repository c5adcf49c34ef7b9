"""Responses branches on a long chain: does the service keep answering while they are stored? (issue 51, item 1)

    python bench/responses_branch_load.py [--turns 10000] [--branches 8] [--users 2] [--mode branch|new]
                                          [--backend sqlite|postgres] [--memory on|off]

Seeds one chain of --turns turns per user (a ~60-word question, a ~300-word answer, a small trace each, as
bench/stores.py writes them) straight into the store of a temporary data dir, then starts `anaphora serve` (fake
chat model, the no-model embedder, JWT auth) on 127.0.0.1 in a child process, and sends --branches concurrent
``POST /v1/responses`` continuing from earlier responses of the chains (each a branch: a new conversation holding
the chain up to that response, copied when the turn is stored), spread over --users users (the per-user in-flight
limit is 4: one user gets four 429s, refused before anything is written), while a probe reads ``/healthz`` every
20 ms. ``--mode new`` is the control: as many new chains at once, nothing copied. Reports the probe's latency (p50,
p99, max) before and during the requests, each request's status and latency, and checks afterwards that every
answered branch holds its whole chain and that the refused ones left nothing; writes
bench/results/responses_branch_load-BACKEND-MODE-uUSERS.json. Bounded: one round, 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx
import jwt
from common import embedded_postgres, git_revision, machine, percentile, summary_ms, write_result
from load import free_port, wait_ready
from stores import _workload

from anaphora.app import Closers, build_conversation_store
from anaphora.settings import Settings
from anaphora.store import Database, NewTurn
from anaphora.store.protocols import ChainStart, new_conversation_id
from anaphora.turn_ids import response_id

SECRET = "bench-secret-that-is-long-enough-for-hs256!"
OWNER = "bench-owner"
PROBE_EVERY_S = 0.02


def seed_chain(settings: Settings, users: list[str], turns: int) -> dict[str, str]:
    """One chain of ``turns`` turns per user (the same texts), written in batches; each user's conversation id."""
    workload = [NewTurn(question=q, answer=a, citations=c, trace=t) for q, a, c, t in _workload(min(turns, 500))]

    async def write() -> dict[str, str]:
        closers = Closers()
        database = closers.opened(Database(settings.data_dir / "anaphora.db"))
        store = build_conversation_store(settings.stores, database, closers)
        try:
            chains = {}
            for user in users:
                chains[user] = new_conversation_id()
                await store.extend(user, chains[user], [], start=ChainStart(title="a long chain"))
                for first in range(0, turns, 500):
                    batch = [workload[(first + n) % len(workload)] for n in range(min(500, turns - first))]
                    await store.extend(user, chains[user], batch)
            return chains
        finally:
            await closers.aclose()

    return asyncio.run(write())


def serve(settings: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANAPHORA_")}
    env.update({f"ANAPHORA_{k.upper()}": v for k, v in settings.items()})
    env.update(ANAPHORA_SERVER_HOST="127.0.0.1", ANAPHORA_SERVER_PORT=str(port))
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "anaphora", "serve"], env=env, stdout=out, stderr=out)


def latency(values: list[float]) -> dict[str, float]:
    return {**summary_ms(values), "p99": round(percentile(values, 99), 3), "max": round(max(values, default=0), 3)}


def bearer(user: str) -> dict[str, str]:
    claims = {"sub": user, "exp": int(time.time()) + 3600, "iat": int(time.time())}
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, algorithm='HS256')}"}


async def probe(base: str, stop: asyncio.Event, samples: list[float]) -> None:
    """/healthz every PROBE_EVERY_S until ``stop``: each reply's latency in ms."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while not stop.is_set():
            began = time.perf_counter()
            reply = await http.get("/healthz")
            samples.append((time.perf_counter() - began) * 1000)
            assert reply.status_code == 200
            await asyncio.sleep(PROBE_EVERY_S)


async def branch(base: str, user: str, previous: str | None) -> dict:
    """One turn continuing ``previous`` (a branch), or starting a new chain (None)."""
    body = {"input": "And on ARM?", **({"previous_response_id": previous} if previous else {})}
    async with httpx.AsyncClient(base_url=base, timeout=300, headers=bearer(user)) as http:
        began = time.perf_counter()
        reply = await http.post("/v1/responses", json=body)
        body = reply.json()
    conversation = (body.get("conversation") or {}).get("id")
    turn = body.get("anaphora", {}).get("turn_index")
    return {"status": reply.status_code, "ms": round((time.perf_counter() - began) * 1000, 1), "user": user,
            "previous": previous, "conversation": conversation, "turn_index": turn}  # fmt: skip


async def stored_state(base: str, users: list[str]) -> dict[str, list[int]]:
    """Each user's conversations' turn counts, through the API."""
    state = {}
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for user in users:
            reply = await http.get("/v1/conversations", params={"limit": 100}, headers=bearer(user))
            state[user] = sorted(c["turn_count"] for c in reply.json()["data"])
    return state


async def run(base: str, chains: dict[str, str], args: argparse.Namespace) -> dict:
    users = list(chains)
    rng = random.Random(0)
    idle: list[float] = []
    await probe_for(base, idle, 1.0)
    before = await stored_state(base, users)
    samples: list[float] = []
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(base, stop, samples))
    await asyncio.sleep(0.3)
    points = [rng.randrange(args.turns // 2, args.turns - 1) for _ in range(args.branches)]
    began = time.perf_counter()
    results = await asyncio.gather(
        *(
            branch(base, users[n % len(users)], response_id(chains[users[n % len(users)]], p))
            for n, p in enumerate(points)
        )
    )
    wall_s = time.perf_counter() - began
    await asyncio.sleep(0.3)
    stop.set()
    await prober
    after = await stored_state(base, users)
    return {"idle": idle, "samples": samples, "results": results, "wall_s": wall_s, "before": before, "after": after,
            "points": points}  # fmt: skip


async def probe_for(base: str, samples: list[float], seconds: float) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(probe(base, stop, samples))
    await asyncio.sleep(seconds)
    stop.set()
    await task


def check(measured: dict, turns: int) -> list[str]:
    """Every answered branch is a whole chain plus its turn; refused ones left nothing (counted per user)."""
    problems = []
    for result in measured["results"]:
        branch_point = int(result["previous"].rsplit("_", 1)[1]) if result["previous"] else -1
        if result["status"] == 200 and result["turn_index"] != branch_point + 1:
            problems.append(f"branch from {result['previous']} answered as turn {result['turn_index']}")
    for user, counts in measured["after"].items():
        answered = [r for r in measured["results"] if r["user"] == user and r["status"] == 200]
        expected = sorted(measured["before"][user] + [int(r["turn_index"]) + 1 for r in answered])
        if counts != expected:
            problems.append(f"{user}: conversations hold {counts} turns, expected {expected}")
    return problems


def report(args: argparse.Namespace, measured: dict, seed_s: float, problems: list[str]) -> dict:
    return {
        "benchmark": "responses_branch_load",
        "date": date.today().isoformat(),
        "machine": machine(),
        "revision": git_revision(),
        "command": "python bench/responses_branch_load.py " + " ".join(sys.argv[1:]),
        "backend": args.backend,
        "chain_turns": args.turns,
        "branches": args.branches,
        "users": args.users,
        "memory": args.memory,
        "mode": args.mode,
        "seed_s": round(seed_s, 1),
        "healthz_idle_ms": latency(measured["idle"]),
        "healthz_during_ms": latency(measured["samples"]),
        "healthz_samples": len(measured["samples"]),
        "branches_wall_s": round(measured["wall_s"], 2),
        "branch_statuses": sorted(r["status"] for r in measured["results"]),
        "branch_ms": latency([r["ms"] for r in measured["results"]]),
        "results": measured["results"],
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--branches", type=int, default=8)
    parser.add_argument("--users", type=int, default=2, help="users the branches are spread over (4 in flight each)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--postgres-url", help="a database to use with --backend postgres (default: a new one)")
    parser.add_argument("--memory", choices=["on", "off"], default="on", help="long-term memory (the default: on)")
    parser.add_argument(
        "--mode", choices=["branch", "new"], default="branch", help="new: the control, new chains (nothing copied)"
    )
    parser.add_argument("--server-log", type=Path, help="keep the server's output here (default: dropped)")
    args = parser.parse_args()
    users = [f"{OWNER}-{n}" for n in range(args.users)]
    with tempfile.TemporaryDirectory(prefix="anaphora-branch-") as tmp, contextlib.ExitStack() as stack:
        data_dir = Path(tmp) / "data"
        extra = {}
        if args.backend == "postgres":
            url = args.postgres_url or stack.enter_context(embedded_postgres())
            extra = {"conversation_store": "postgres", "postgres_url": url}
        settings = Settings(data_dir=data_dir, chat_model="fake", embedder="hashing", **extra)
        started = time.perf_counter()
        chains = seed_chain(settings, users, args.turns)
        seed_s = time.perf_counter() - started
        port = free_port()
        env = {
            **{"data_dir": str(data_dir), "chat_model": "fake", "embedder": "hashing", "jwt_secret": SECRET},
            **{"similarity_threshold": "0", "rewriter": "expansion", "history_sweep_interval_s": "3600", **extra},
            **({"memory": "off"} if args.memory == "off" else {}),
        }
        process = serve(env, port, args.server_log or Path(tmp) / "server.log")
        try:
            base = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(base, process))
            measured = asyncio.run(run(base, chains, args))
        finally:
            process.terminate()
            process.wait(timeout=30)
    problems = check(measured, args.turns)
    payload = report(args, measured, seed_s, problems)
    path = write_result(f"responses_branch_load-{args.backend}-{args.mode}-u{args.users}", payload)
    print({k: v for k, v in payload.items() if k != "results"})
    print(f"written to {path}")
    if problems:
        raise SystemExit("partial state: " + "; ".join(problems))


if __name__ == "__main__":
    main()
