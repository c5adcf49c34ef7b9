"""A new user's first minute: a fresh data dir, `anaphora ingest` of a realdocs-dev corpus, then the first answer.

    python bench/first_answer.py [--corpus traefik] [--question "..."] [--variants new,baseline]
                                 [--baseline-src DIR] [--cache-dir DIR]

Each variant runs, in its own interpreter and a fresh data dir, exactly what a user types:
``python -m anaphora --data-dir FRESH ingest TREE`` and, when it returns, ``python -m anaphora --data-dir FRESH ask
QUESTION``. The wall time to the first answer is from the start of ``ingest`` to the end of ``ask``. Variants:

- ``new``: this tree with its defaults (the passages first, then ``ingest`` returns and a background process embeds
  the answer units, at low priority, while the question is asked);
- ``new-fp32`` / ``new-int8``: the same at ``embedder_precision`` fp32 / int8;
- ``baseline``: another source tree (``--baseline-src``, e.g. ``git archive 7d84ce1 | tar -x -C /tmp/base``) at
  fp32, whose ``ingest`` embeds every passage's answer units with the passages before it returns ("units first").

Measured per variant: ingest seconds and chunks/s (passages written, from the start of the command), the CPU of the
ingest process while it embedded (sampled from /proc: cores busy from its first progress line to its exit), the
ask's seconds, the wall time to the first answer, and for ``new`` when the background units finished and whether
the same question asked again then gets the same answer. The model cache (``--cache-dir``: ONNX exports) is made
before anything is timed: a fresh data dir, not a fresh machine. The corpus is copied without its SOURCE.md.
Writes bench/results/first_answer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

from common import ROOT, git_revision, machine, write_result

REALDOCS = ROOT.parent / "shared" / "bench" / "realdocs-dev"
QUESTION = "running traefik v3 in docker compose. how do i get real let's encrypt certs for my containers?"
TICKS = os.sysconf("SC_CLK_TCK")
VARIANTS = {
    "new": {"src": "this", "precision": None},
    "new-fp32": {"src": "this", "precision": "fp32"},
    "new-int8": {"src": "this", "precision": "int8"},
    "baseline": {"src": "baseline", "precision": "fp32"},
}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process (all its threads) so far, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def environment(src: Path, cache_dir: Path, precision: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANAPHORA_")}
    env.update({"PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1", "ANAPHORA_CACHE_DIR": str(cache_dir)})
    if precision:
        env["ANAPHORA_EMBEDDER_PRECISION"] = precision
    return env


def timed_ingest(env: dict[str, str], data_dir: Path, tree: Path) -> dict:
    """Run ``ingest``, sampling its CPU; returns the figures and its output."""
    command = [sys.executable, "-m", "anaphora", "--data-dir", str(data_dir), "ingest", "--progress-every", "1"]
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, str(tree)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    samples: list[tuple[float, float]] = []  # (seconds since start, CPU seconds)
    embedding_since: list[float] = []
    errors: list[str] = []

    timeline: list[tuple[float, int, int, int]] = []  # (seconds, files read, chunks embedded, chunks parsed)

    def read_errors() -> None:
        for line in process.stderr:
            errors.append(line)
            if not embedding_since and re.search(r"[1-9][\d,]*/[\d,]+ chunks embedded", line):
                embedding_since.append(time.perf_counter() - started)
            if found := re.search(r"([\d,]+)/[\d,]+ files read(?:, ([\d,]+)/([\d,]+) chunks embedded)?", line):
                numbers = [int((g or "0").replace(",", "")) for g in found.groups()]
                timeline.append((round(time.perf_counter() - started, 1), *numbers))

    reader = threading.Thread(target=read_errors, daemon=True)
    reader.start()
    while process.poll() is None:
        cpu = cpu_seconds(process.pid)
        if cpu is not None:
            samples.append((time.perf_counter() - started, cpu))
        time.sleep(0.25)
    seconds = time.perf_counter() - started
    out = process.stdout.read()
    reader.join()
    if process.returncode:
        raise SystemExit(f"ingest failed ({process.returncode}): {''.join(errors)[-2000:]}")
    chunks = int(re.search(r"([\d,]+) chunks written", out).group(1).replace(",", ""))
    return {
        "seconds": round(seconds, 1),
        "chunks": chunks,
        "chunks_per_s": round(chunks / seconds, 1),
        "cores_busy_embedding": cores_busy(samples, embedding_since[0] if embedding_since else 0.0),
        "cores_busy_whole": cores_busy(samples, 0.0),
        "overlap": overlap(timeline, samples),
        "output": out,
    }


def overlap(timeline: list[tuple[float, int, int, int]], samples: list[tuple[float, float]]) -> dict:
    """When parsing and embedding ran, from the progress lines (one a second): the parser ahead of the embedder
    while both run is the overlap; the CPU per second of each stretch says whether a core idled."""
    if not timeline:
        return {}
    files_total = max(t[1] for t in timeline)
    all_read = next((t[0] for t in timeline if t[1] == files_total), None)
    first = next((t[0] for t in timeline if t[2] > 0), None)
    return {
        "first_chunks_embedded_s": first,
        "all_files_read_s": all_read,
        "cores_busy_while_parsing_and_embedding": cores_between(samples, first, all_read),
        "cores_busy_after_parsing": cores_between(samples, all_read, None),
        "timeline": timeline[:: max(1, len(timeline) // 40)],  # (s, files read, chunks embedded, chunks parsed)
    }


def cores_between(samples: list[tuple[float, float]], start: float | None, end: float | None) -> float | None:
    if start is None:
        return None
    window = [s for s in samples if s[0] >= start and (end is None or s[0] <= end)]
    if len(window) < 2 or window[-1][0] <= window[0][0]:
        return None
    return round((window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]), 2)


def cores_busy(samples: list[tuple[float, float]], since: float) -> float | None:
    window = [s for s in samples if s[0] >= since]
    if len(window) < 2 or window[-1][0] <= window[0][0]:
        return None
    return round((window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]), 2)


def ask(env: dict[str, str], data_dir: Path, question: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "anaphora", "--data-dir", str(data_dir), "ask", question],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def answer_text(output: str) -> str:
    """The answer and its sources, without the lines that name the conversation or say it was not remembered."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(("Not remembered", "response ")))


def wait_for(pid: int, timeout_s: float) -> float | None:
    started = time.perf_counter()
    while Path(f"/proc/{pid}").exists():
        if time.perf_counter() - started > timeout_s:
            return None
        time.sleep(0.5)
    return time.perf_counter() - started


def run_variant(name: str, tree: Path, scratch: Path, args) -> dict:
    spec = VARIANTS[name]
    src = ROOT / "src" if spec["src"] == "this" else args.baseline_src
    env = environment(src, args.cache_dir, spec["precision"])
    data_dir = scratch / f"data-{name}"
    row = timed_ingest(env, data_dir, tree)
    output = row.pop("output")
    ask_s, answer = ask(env, data_dir, args.question)
    row.update(ask_s=round(ask_s, 2), first_answer_s=round(row["seconds"] + ask_s, 1), answer=answer_text(answer))
    background = re.search(r"in the background \(pid (\d+)", output)
    if background and name not in args.wait_units.split(","):  # stopped, so it does not slow the next variant
        os.kill(int(background.group(1)), signal.SIGTERM)
        wait_for(int(background.group(1)), 30)
    elif background:
        waited = wait_for(int(background.group(1)), args.units_timeout)
        row["units_done_after_first_answer_s"] = None if waited is None else round(waited, 1)
        log = (data_dir / "answer-units.log").read_text() if (data_dir / "answer-units.log").exists() else ""
        row["units_log"] = log.strip().splitlines()[-1:] if log else []
        _, again = ask(env, data_dir, args.question)
        row["same_answer_after_units"] = answer_text(again) == row["answer"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="traefik")
    parser.add_argument("--tree", type=Path, default=None, help="another docs tree than the corpus's (a smoke test)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--variants", default="new,baseline")
    parser.add_argument("--baseline-src", type=Path, default=Path("/tmp/h1snap/repo/src"))
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "bench" / ".cache" / "model-cache")
    parser.add_argument("--units-timeout", type=float, default=1800.0)
    parser.add_argument(
        "--wait-units", default="new,new-int8", help="variants whose background units are awaited (then asked again)"
    )
    args = parser.parse_args()
    variants = args.variants.split(",")
    output = {
        "benchmark": "first_answer",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "load_before": Path("/proc/loadavg").read_text().split()[:3],
        "command": "python bench/first_answer.py " + " ".join(sys.argv[1:]),
        "corpus": args.corpus,
        "question": args.question,
        "variants": {},
    }
    with tempfile.TemporaryDirectory(prefix="anaphora-first-") as scratch:
        tree = Path(scratch) / "docs" / args.corpus
        source = args.tree or REALDOCS / args.corpus
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("SOURCE.md"))
        warm = Path(scratch) / "warm"
        warm.mkdir()
        (warm / "a.md").write_text("# Warm up\n\nOne sentence to embed, so the model exports exist.\n")
        for name in variants:  # the ONNX exports (and the int8 model) made before anything is timed
            spec = VARIANTS[name]
            src = ROOT / "src" if spec["src"] == "this" else args.baseline_src
            env = environment(src, args.cache_dir, spec["precision"])
            units = ["--answer-units", "wait"] if spec["src"] == "this" else []  # the baseline has no such option
            command = ["-m", "anaphora", "--data-dir", str(Path(scratch) / f"warm-{name}"), "ingest", *units]
            subprocess.run([sys.executable, *command, str(warm)], env=env, check=True, capture_output=True)
        for name in variants:
            row = run_variant(name, tree, Path(scratch), args)
            output["variants"][name] = row
            print(name, json.dumps({k: v for k, v in row.items() if k != "answer"}), flush=True)
            write_result("first_answer", output)
    rows = output["variants"]
    if "baseline" in rows:
        base = rows["baseline"]
        output["ratios"] = {
            f"{name}_vs_baseline": {
                "first_answer_s": round(row["first_answer_s"] / base["first_answer_s"], 3),
                "chunks_per_s": round(row["chunks_per_s"] / base["chunks_per_s"], 2),
            }
            for name, row in rows.items()
            if name != "baseline"
        }
    output["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps(output.get("ratios", {}), indent=1))
    print(f"wrote {write_result('first_answer', output)}")


if __name__ == "__main__":
    main()
