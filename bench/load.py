"""HTTP load: M concurrent conversations against `anaphora serve`'s app, with the fake chat model or the embedded
default.

    python bench/load.py [--conversations 8] [--turns 400] [--max-seconds 30] [--domain clapnq]
                         [--arm fake|embedded] [--workers N] [--profile-turns 40]
                         [--routes conversations,chat,responses] [--rounds R] [--memory on|off]

Copies the dev corpus index (bench/.cache/<domain>, built by bench/retrieval_latency.py) to a temporary data dir,
so the cache is neither migrated nor filled with conversations; serves create_app(Settings(data_dir=..., auth=none,
chat_model=fake)) with uvicorn on 127.0.0.1 in a child process (its own interpreter, so the client does not share
its GIL); warms it up; then M clients (httpx.AsyncClient) each hold a conversation and ask the domain's task
questions in order, starting a new conversation every --turns-per-conversation turns, until --turns turns are
done or --max-seconds pass. Reports turns/s, latency p50/p95, the service overhead per turn (client latency minus
the pipeline stages the turn's trace timed: HTTP, JSON, auth, locks, loading the history and storing the turn, and,
with several clients, the time a turn waits for the server's one event loop while other turns run), the route
overhead per turn (client latency minus the engine's own time for the turn, which the reply's ``Server-Timing:
engine;dur=`` header gives: everything the engine does, stages, history and the stored turn included, is the
engine's, on every route alike), the stages' own times, and errors, and writes bench/results/load.json.

``--arm embedded`` serves what a fresh install runs instead: the embedded chat model's defaults (extractive answers,
the model-free expansion query stage, so no model call on a turn), and adds ``cpu_ms_by_stage``: the same kind of
turns run one at a time in this process (--profile-turns of them, a fresh copy of the index), each stage's process
CPU time measured around it (every thread of the process counts, and nothing else runs meanwhile), in three passes:
passages met for the first time, everything seen before, and the same questions with their query vectors dropped
from the embedding cache (a warm service asked new questions).
``--workers N`` serves with N uvicorn worker processes behind the one port (turn lock and sessions in the Redis at
$ANAPHORA_REDIS_URL, default redis://127.0.0.1:6379/0, as several workers need); server CPU counts all of them.
Results go to bench/results/load-<arm>-w<N>.json (the fake arm with one worker keeps load.json).
Other ``--routes`` (bench/load_routes.py) are loaded against the same server and written to
bench/results/load_routes.json, each under "routes" (the first also at the top level): in ``--rounds`` rounds
(default 10 with several routes), each route's share of --turns and --max-seconds split across them and the routes
taking turns, so that a machine whose other load changes during the run weighs on every route alike. ``--memory
off`` serves without long-term memory.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx
from common import CACHE, ROOT, domain_paths, git_revision, machine, summary_ms, write_result
from load_routes import ROUTES

from anaphora.pipeline.observer import StageObserver


def fake_arm(data_dir: str, conversations: int) -> dict:
    """The service overhead arm: the fake chat model (generate mode). With auth 'none' every client is user
    "local", so the per-user concurrency limit is raised to the number of clients (else most turns would get 429)."""
    return {
        "data_dir": data_dir,
        "chat_model": "fake",
        "auth": "none",
        "max_concurrent_turns_per_user": max(4, conversations),
    }


def embedded_arm(data_dir: str, conversations: int) -> dict:
    """What a fresh install serves: the embedded chat model, whose defaults are extractive answers (no model call
    on a turn that retrieved) and the model-free history expansion as the query stage."""
    return {**fake_arm(data_dir, conversations), "chat_model": "embedded", "rewriter": "expansion"}


ARMS = {"fake": fake_arm, "embedded": embedded_arm}


def shared_coordination(workers: int) -> dict:
    """Several workers share the turn lock and the sessions (Redis); one needs neither."""
    if workers == 1:
        return {}
    return {
        "turn_lock": "redis",
        "session_store": "redis",
        "redis_url": os.environ.get("ANAPHORA_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "redis_key_prefix": f"anaphora-load-{os.getpid()}:",
    }


def serve(overrides: dict, port: int, workers: int) -> None:
    """The child process: the service on 127.0.0.1:port, with ``workers`` uvicorn workers (the product's own
    worker factory reads the settings from the environment, as `anaphora serve --workers` hands them over)."""
    import uvicorn

    from anaphora.server.serve import OVERRIDES_ENV, WORKER_HEALTHCHECK_S

    os.environ[OVERRIDES_ENV] = json.dumps(overrides)
    uvicorn.run(
        "anaphora.server.serve:worker_app",
        factory=True,
        workers=workers,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants so far (Linux /proc): the server's, workers
    included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += (task / "children").read_text().split()
    return own + sum(cpu_seconds(int(child)) for child in children)


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


def engine_ms(response: httpx.Response) -> float | None:
    """The engine's own time for the turn, from the reply's ``Server-Timing: engine;dur=<ms>``."""
    for metric in response.headers.get("server-timing", "").split(","):
        name, _, params = metric.strip().partition(";")
        if name == "engine" and params.startswith("dur="):
            return float(params.removeprefix("dur="))
    return None


class Client:
    """One load client's conversation on a route, kept across rounds."""

    def __init__(self, route: str) -> None:
        self.arm = ROUTES[route]()
        self.asked: int | None = None


class Load:
    """One route's load, run in one or more rounds (:meth:`run`), its measures accumulated."""

    def __init__(self, questions: list[str], per_conversation: int, route: str = "conversations") -> None:
        self.route = route
        self.clients: list[Client] = []
        self.questions = itertools.cycle(questions)
        self.budget = 0
        self.deadline = 0.0
        self.per_conversation = per_conversation
        self.latencies: list[float] = []
        self.overheads: list[float] = []
        self.route_overheads: list[float] = []
        self.outside_stages: list[float] = []
        self.errors: dict[str, int] = {}
        self.stages: dict[str, list[float]] = {}
        self.seconds = self.server_cpu = self.client_cpu = 0.0

    def _error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def client(self, http: httpx.AsyncClient, client: Client) -> None:
        route = client.arm
        while self.budget > 0 and time.monotonic() < self.deadline:
            self.budget -= 1
            try:
                if client.asked is None or client.asked == self.per_conversation:
                    await route.reset(http)
                    client.asked = 0
                started = time.perf_counter()
                response = await route.ask(http, next(self.questions))
                ms = (time.perf_counter() - started) * 1000
            except httpx.HTTPError as exc:
                self._error(type(exc).__name__)
                continue
            client.asked += 1
            if response.status_code != 200:
                self._error(str(response.status_code))
                continue
            timed = route.trace(response.json())["stages"]
            for stage in timed:
                self.stages.setdefault(stage["name"], []).append(stage["ms"])
            stages = sum(stage["ms"] for stage in timed)
            self.latencies.append(ms)
            self.overheads.append(max(0.0, ms - stages))
            engine = engine_ms(response)
            if engine is not None:
                self.route_overheads.append(max(0.0, ms - engine))
                self.outside_stages.append(max(0.0, engine - stages))

    async def run(self, http: httpx.AsyncClient, conversations: int, turns: int, max_seconds: float, pid: int) -> None:
        """One round: ``turns`` more turns (or ``max_seconds``) from ``conversations`` concurrent clients; ``pid``:
        the server's, whose CPU time is counted."""
        while len(self.clients) < conversations:
            self.clients.append(Client(self.route))
        self.budget = turns
        server_cpu, client_cpu = cpu_seconds(pid), time.process_time()
        started = time.perf_counter()
        self.deadline = time.monotonic() + max_seconds
        await asyncio.gather(*(self.client(http, client) for client in self.clients[:conversations]))
        self.seconds += time.perf_counter() - started
        self.server_cpu += cpu_seconds(pid) - server_cpu
        self.client_cpu += time.process_time() - client_cpu


async def run_rounds(base: str, loads: list[Load], args: argparse.Namespace, rounds: int, pid: int) -> None:
    """``rounds`` rounds in which each route takes its turn, over one set of connections."""
    limits = httpx.Limits(max_connections=args.conversations, max_keepalive_connections=args.conversations)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
        for number in range(rounds):
            turns = args.turns // rounds + (number < args.turns % rounds)
            for load in loads:
                await load.run(http, args.conversations, turns, args.max_seconds / rounds, pid)


async def warm_up(base: str, questions: list[str]) -> None:
    """Load the embedder and the indexes before timing anything."""
    async with httpx.AsyncClient(base_url=base, timeout=300) as http:
        conversation = (await http.post("/v1/conversations", json={})).json()["id"]
        for question in questions[:3]:
            (
                await http.post(f"/v1/conversations/{conversation}/messages", json={"content": question})
            ).raise_for_status()


def measures(load: Load) -> dict:
    done, seconds, server_cpu, client_cpu = len(load.latencies), load.seconds, load.server_cpu, load.client_cpu
    return {
        "turns": done,
        "seconds": round(seconds, 3),
        "turns_per_s": round(done / seconds, 2) if seconds else 0.0,
        "latency_ms": summary_ms(load.latencies),
        "service_overhead_ms": summary_ms(load.overheads),  # latency minus the traced stages
        "route_overhead_ms": summary_ms(load.route_overheads),  # latency minus the engine's own time
        "engine_outside_stages_ms": summary_ms(load.outside_stages),  # history, the stored turn, the trace
        "stages_ms": {name: summary_ms(values) for name, values in load.stages.items()},
        "errors": load.errors,
        # CPU per turn: the server's (all its threads and workers) and the load generator's, which shares the cores
        "server_cpu_ms_per_turn": round(server_cpu * 1000 / done, 2) if done else None,
        "client_cpu_ms_per_turn": round(client_cpu * 1000 / done, 2) if done else None,
        "cpu_cores_busy": round((server_cpu + client_cpu) / seconds, 2) if seconds else None,
    }


class StageCpu(StageObserver):
    """The engine's observer that also measures each stage's process CPU time. Only meaningful with one turn at a
    time in the process (then all its threads' CPU during a stage is that stage's)."""

    def __init__(self, observer: StageObserver) -> None:
        super().__init__(observer.metrics, observer.tracer)
        self.cpu: dict[str, list[float]] = {}

    async def run(self, stage, state, records):
        applies, before = stage.applies(state), time.process_time()
        state = await super().run(stage, state, records)
        if applies:
            self.cpu.setdefault(stage.name, []).append((time.process_time() - before) * 1000)
        return state


def forget_queries(components, asked: set[str]) -> int:
    """Drop the vectors of the turns' questions and queries from the embedding cache (the keys erase drops), so
    that the next pass embeds its queries as for questions never asked; the passages' sentences stay in the
    process's memo. Returns how many entries went."""
    from anaphora.embeddings import cache_key

    embedder = components.embedder
    return embedder.cache.delete_many([cache_key(embedder.name, text) for text in asked if text])


PASSES = ("first pass", "second pass", "new queries")


async def profile_stages(overrides: dict, questions: list[str], turns: int, per_conversation: int) -> dict:
    """CPU per turn by stage, turns run one at a time in this process: a first pass over ``turns`` questions (the
    passages' sentences met for the first time, unless the copied index's cache already holds them), a second
    over the same ones (every sentence and query seen before), and a third over the same ones with their queries'
    vectors dropped from the embedding cache first (a warm service asked questions it has not seen: the queries
    embedded, the passages' sentences known)."""
    from anaphora.app import aclose_components, build_components, close_local
    from anaphora.pipeline.engine import LOCAL_USER, TurnRequest
    from anaphora.settings import load_settings

    components = build_components(load_settings(**overrides))
    engine = components.engine
    observer = StageCpu(engine.observer)
    engine.observer = observer
    passes = {}
    asked: set[str] = set()
    try:
        for name in PASSES:
            forgotten = forget_queries(components, asked) if name == "new queries" else None
            observer.cpu.clear()
            totals = []
            conversation = None
            for n, question in enumerate(itertools.islice(itertools.cycle(questions), turns)):
                if n % per_conversation == 0:
                    conversation = (await components.conversations.create(LOCAL_USER, "")).id
                before = time.process_time()
                result = await engine.ask(TurnRequest(question, conversation_id=conversation))
                await engine.drain()
                totals.append((time.process_time() - before) * 1000)
                trace = result.trace
                asked.update([question, trace.question, trace.query, *trace.alternate_queries])
            stages = {stage: round(statistics.fmean(ms), 2) for stage, ms in observer.cpu.items()}
            in_stages = sum(sum(ms) for ms in observer.cpu.values()) / len(totals)
            passes[name] = {
                "turns": len(totals),
                "turn_cpu_ms": summary_ms(totals),
                "stage_cpu_ms_mean": stages,  # mean over the turns the stage ran on
                "outside_stages_cpu_ms_mean": round(statistics.fmean(totals) - in_stages, 2),
                "turn_over_retrieve": round(statistics.fmean(totals) / stages["retrieve"], 2)
                if stages.get("retrieve")
                else None,
                **({"query_vectors_dropped": forgotten} if forgotten is not None else {}),
            }
            print(name, json.dumps(passes[name]), flush=True)
    finally:
        await aclose_components(components)
        close_local(components)
    return passes


def profile_only(args: argparse.Namespace) -> None:
    """The embedded arm's CPU profile alone, with whatever ``anaphora`` is first on PYTHONPATH (so the same
    command measures another source tree); prints it and writes bench/results/load-profile.json."""
    _, tasks_path = domain_paths(args.domain)
    questions = [json.loads(line)["question"] for line in tasks_path.open() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="anaphora-profile-") as scratch:
        profiled = Path(scratch) / args.domain
        source = args.index or CACHE / args.domain
        shutil.copytree(source, profiled, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
        overrides = embedded_arm(str(profiled), 1)
        profile = asyncio.run(profile_stages(overrides, questions, args.profile_turns, args.turns_per_conversation))
    import anaphora

    result = {"command": "python bench/load.py " + " ".join(sys.argv[1:]), "anaphora": anaphora.__file__, **profile}
    print(f"wrote {write_result('load-profile', result)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", "-m", type=int, default=8)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--max-seconds", type=float, default=30)
    parser.add_argument("--turns-per-conversation", type=int, default=5)
    parser.add_argument("--domain", default="clapnq")
    parser.add_argument("--index", type=Path, default=None, help="the index to serve (default: bench/.cache/DOMAIN)")
    parser.add_argument("--arm", choices=sorted(ARMS), default="fake")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes of the server")
    parser.add_argument("--profile-turns", type=int, default=40, help="turns of the in-process CPU profile (embedded)")
    parser.add_argument(
        "--profile-only", action="store_true", help="only the in-process CPU profile (e.g. of another source tree)"
    )
    parser.add_argument("--routes", default="conversations", help=f"comma-separated, of: {', '.join(ROUTES)}")
    parser.add_argument("--rounds", type=int, default=None, help="rounds the routes take turns in (default 10 with "
                        "several routes, else 1)")  # fmt: skip
    parser.add_argument("--memory", choices=["on", "off"], default="on", help="long-term memory on the server")
    parser.add_argument("--serve", nargs=2, metavar=("OVERRIDES_JSON", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(json.loads(args.serve[0]), int(args.serve[1]), args.workers)
        return
    if args.profile_only:
        profile_only(args)
        return

    routes = args.routes.split(",")
    if unknown := [r for r in routes if r not in ROUTES]:
        raise SystemExit(f"unknown route(s) {', '.join(unknown)}: choose from {', '.join(ROUTES)}")
    rounds = args.rounds or (10 if len(routes) > 1 else 1)
    source = args.index or CACHE / args.domain
    if not (source / "anaphora.db").exists():
        raise SystemExit(f"no index at {source}: run python bench/retrieval_latency.py --domain {args.domain} first")
    _, tasks_path = domain_paths(args.domain)
    questions = [json.loads(line)["question"] for line in tasks_path.open() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="anaphora-load-") as scratch:
        data_dir = Path(scratch) / args.domain
        shutil.copytree(source, data_dir, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
        overrides = {**ARMS[args.arm](str(data_dir), args.conversations), **shared_coordination(args.workers)}
        overrides["memory"] = args.memory
        port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "bench")}
        if os.environ.get("PYTHONPATH"):  # a worktree's src put first by the caller stays first
            env["PYTHONPATH"] = os.environ["PYTHONPATH"] + os.pathsep + env["PYTHONPATH"]
        server = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                json.dumps(overrides),
                str(port),
                "--workers",
                str(args.workers),
            ],
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(wait_ready(base, server))
            for _ in range(args.workers):  # each worker loads its own embedder and indexes on its first turns
                asyncio.run(warm_up(base, questions))
            loads = {route: Load(questions, args.turns_per_conversation, route) for route in routes}
            asyncio.run(run_rounds(base, list(loads.values()), args, rounds, server.pid))  # against one warm server
            measured = {route: measures(load) for route, load in loads.items()}
        finally:
            server.terminate()
            server.wait(timeout=60)
        profile = None
        if args.arm == "embedded" and args.profile_turns:
            profiled = Path(scratch) / "profiled"
            shutil.copytree(source, profiled, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
            profile = asyncio.run(
                profile_stages(
                    {**ARMS[args.arm](str(profiled), 1)}, questions, args.profile_turns, args.turns_per_conversation
                )
            )
    result = {
        "benchmark": "load",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": "python bench/load.py " + " ".join(sys.argv[1:]),
        "settings": {
            "domain": args.domain,
            "arm": args.arm,
            "workers": args.workers,
            "conversations": args.conversations,
            "turns_requested": args.turns,
            "max_seconds": args.max_seconds,
            "turns_per_conversation": args.turns_per_conversation,
            "rounds": rounds,
            **{k: v for k, v in overrides.items() if k not in ("data_dir", "redis_url", "redis_key_prefix")},
            "routes": routes,
        },
        **measured[routes[0]],
        "cpu_ms_by_stage": profile,
    }
    if len(routes) > 1:
        result["routes"] = measured
    name = "load" if (args.arm, args.workers) == ("fake", 1) else f"load-{args.arm}-w{args.workers}"
    name = name if routes == ["conversations"] else "load_routes"
    path = write_result(name, result)
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
