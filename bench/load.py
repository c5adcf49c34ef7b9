"""HTTP load: M concurrent conversations against `anaphora serve`'s app, with the fake chat model.

    python bench/load.py [--conversations 8] [--turns 400] [--max-seconds 30] [--domain clapnq]
                         [--routes conversations,chat,responses]

Copies the dev corpus index (bench/.cache/<domain>, built by bench/retrieval_latency.py) to a temporary data dir,
so the cache is neither migrated nor filled with conversations; serves create_app(Settings(data_dir=..., auth=none,
chat_model=fake)) with uvicorn on 127.0.0.1 in a child process (its own interpreter, so the client does not share
its GIL); warms it up; then M clients (httpx.AsyncClient) each hold a conversation and ask the domain's task
questions in order, starting a new conversation every --turns-per-conversation turns, until --turns turns are
done or --max-seconds pass. Reports turns/s, latency p50/p95, the service overhead per turn (client latency minus
the pipeline stages the turn's trace timed: HTTP, JSON, auth, locks, storing the turn, and, with several clients,
the time a turn waits for the server's one event loop while other turns run), the stages' own times, and errors,
and writes bench/results/load.json. Other --routes (bench/load_routes.py) are loaded in turn against the same
server and written to bench/results/load_routes.json, each under "routes" (the first also at the top level).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx
from common import CACHE, ROOT, domain_paths, git_revision, machine, summary_ms, write_result
from load_routes import ARMS


def serve(data_dir: str, port: int, conversations: int, memory: str = "on") -> None:
    """The child process: the service on 127.0.0.1:port. With auth 'none' every client is user "local", so the
    per-user concurrency limit is raised to the number of clients (else most turns would get 429)."""
    import uvicorn

    from anaphora import Settings
    from anaphora.server import create_app

    settings = Settings(
        data_dir=Path(data_dir),
        chat_model="fake",
        auth="none",
        max_concurrent_turns_per_user=max(4, conversations),
        memory=memory,
    )
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), to tell how busy the server was."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_ready(base: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"the server exited with {process.returncode}")
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit("the server did not become ready")


class Load:
    def __init__(
        self, questions: list[str], turns: int, max_seconds: float, per_conversation: int, route: str = "conversations"
    ) -> None:
        self.arm = ARMS[route]
        self.questions = itertools.cycle(questions)
        self.budget = turns
        self.deadline = 0.0
        self.max_seconds = max_seconds
        self.per_conversation = per_conversation
        self.latencies: list[float] = []
        self.overheads: list[float] = []
        self.errors: dict[str, int] = {}
        self.stages: dict[str, list[float]] = {}

    def _error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def client(self, http: httpx.AsyncClient) -> None:
        arm, asked = self.arm(), None
        while self.budget > 0 and time.monotonic() < self.deadline:
            self.budget -= 1
            try:
                if asked is None or asked == self.per_conversation:
                    await arm.reset(http)
                    asked = 0
                started = time.perf_counter()
                response = await arm.ask(http, next(self.questions))
                ms = (time.perf_counter() - started) * 1000
            except httpx.HTTPError as exc:
                self._error(type(exc).__name__)
                continue
            asked += 1
            if response.status_code != 200:
                self._error(str(response.status_code))
                continue
            timed = arm.trace(response.json())["stages"]
            for stage in timed:
                self.stages.setdefault(stage["name"], []).append(stage["ms"])
            stages = sum(stage["ms"] for stage in timed)
            self.latencies.append(ms)
            self.overheads.append(max(0.0, ms - stages))

    async def run(self, base: str, conversations: int) -> float:
        limits = httpx.Limits(max_connections=conversations, max_keepalive_connections=conversations)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
            started = time.perf_counter()
            self.deadline = time.monotonic() + self.max_seconds
            await asyncio.gather(*(self.client(http) for _ in range(conversations)))
            return time.perf_counter() - started


async def warm_up(base: str, questions: list[str]) -> None:
    """Load the embedder and the indexes before timing anything."""
    async with httpx.AsyncClient(base_url=base, timeout=300) as http:
        conversation = (await http.post("/v1/conversations", json={})).json()["id"]
        for question in questions[:3]:
            (
                await http.post(f"/v1/conversations/{conversation}/messages", json={"content": question})
            ).raise_for_status()


def measures(load: Load, seconds: float, server_cpu: float, client_cpu: float) -> dict:
    done = len(load.latencies)
    return {
        "turns": done,
        "seconds": round(seconds, 3),
        "turns_per_s": round(done / seconds, 2) if seconds else 0.0,
        "latency_ms": summary_ms(load.latencies),
        "service_overhead_ms": summary_ms(load.overheads),
        "stages_ms": {name: summary_ms(values) for name, values in load.stages.items()},
        "errors": load.errors,
        # CPU per turn: the server's (all its threads) and the load generator's, which shares the 2 cores
        "server_cpu_ms_per_turn": round(server_cpu * 1000 / done, 2) if done else None,
        "client_cpu_ms_per_turn": round(client_cpu * 1000 / done, 2) if done else None,
        "cpu_cores_busy": round((server_cpu + client_cpu) / seconds, 2) if seconds else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", "-m", type=int, default=8)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--max-seconds", type=float, default=30)
    parser.add_argument("--turns-per-conversation", type=int, default=5)
    parser.add_argument("--domain", default="clapnq")
    parser.add_argument("--routes", default="conversations", help=f"comma-separated, of: {', '.join(ARMS)}")
    parser.add_argument("--memory", choices=["on", "off"], default="on", help="long-term memory on the server")
    parser.add_argument("--serve", nargs=2, metavar=("DATA_DIR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.conversations, args.memory)
        return

    routes = args.routes.split(",")
    if unknown := [r for r in routes if r not in ARMS]:
        raise SystemExit(f"unknown route(s) {', '.join(unknown)}: choose from {', '.join(ARMS)}")
    source = CACHE / args.domain
    if not (source / "anaphora.db").exists():
        raise SystemExit(f"no index at {source}: run python bench/retrieval_latency.py --domain {args.domain} first")
    _, tasks_path = domain_paths(args.domain)
    questions = [json.loads(line)["question"] for line in tasks_path.open() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="anaphora-load-") as scratch:
        data_dir = Path(scratch) / args.domain
        shutil.copytree(source, data_dir, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
        port = free_port()
        path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench")])  # this checkout's code, not an install's
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": path}
        server = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                str(data_dir),
                str(port),
                "-m",
                str(args.conversations),
                "--memory",
                args.memory,
            ],
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(wait_ready(base, server))
            asyncio.run(warm_up(base, questions))
            measured = {}
            for route in routes:  # back to back, against the same warm server
                load = Load(questions, args.turns, args.max_seconds, args.turns_per_conversation, route)
                server_cpu, client_cpu = cpu_seconds(server.pid), time.process_time()
                seconds = asyncio.run(load.run(base, args.conversations))
                server_cpu, client_cpu = cpu_seconds(server.pid) - server_cpu, time.process_time() - client_cpu
                measured[route] = measures(load, seconds, server_cpu, client_cpu)
        finally:
            server.terminate()
            server.wait(timeout=60)
    result = {
        "benchmark": "load",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": "python bench/load.py " + " ".join(sys.argv[1:]),
        "settings": {
            "domain": args.domain,
            "conversations": args.conversations,
            "turns_requested": args.turns,
            "max_seconds": args.max_seconds,
            "turns_per_conversation": args.turns_per_conversation,
            "chat_model": "fake",
            "auth": "none",
            "max_concurrent_turns_per_user": max(4, args.conversations),
            "memory": args.memory,
            "routes": routes,
        },
        **measured[routes[0]],
    }
    if len(routes) > 1:
        result["routes"] = measured
    path = write_result("load" if routes == ["conversations"] else "load_routes", result)
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
