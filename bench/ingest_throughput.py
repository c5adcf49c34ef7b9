"""Ingest throughput on the realdocs-dev docs trees: `anaphora ingest` chunks/s, variant after variant in one run.

    python bench/ingest_throughput.py [--baseline-src DIR] [--variants baseline,fp32,int8,int8-workers2]
                                      [--embedder-sample 2000] [--rounds 1] [--every N]

The two trees (loki, traefik) are copied without their SOURCE.md into a scratch folder; each variant runs the same
command, `python -m anaphora --data-dir FRESH ingest loki traefik`, in its own interpreter with a fresh
data dir and one shared model cache (the ONNX exports are made before anything is timed). Variants:

- ``baseline``: the CLI of another source tree (``--baseline-src``, e.g. an export of main: ``git archive main |
  tar -x -C /tmp/base``), default settings;
- ``fp32`` / ``int8``: this tree at ``embedder_precision`` fp32 / int8, its other settings at their defaults;
- ``int8-workers2``: int8 with ``--workers 2``;
- ``fp32-spin`` / ``int8-spin`` and ``-nospin``: fp32 / int8 with ``embedder_spin_wait`` on / off (whether the
  embedder's threads spin-wait while a batch runs; on by default since issue 26's third round).

``--rounds`` repeats the whole sequence (the machine may be shared: compare ratios within a round). Then the
embedder alone: ``--embedder-sample`` chunk texts of the ingested index, embedded by the fp32 and the int8 embedder
in this process, alternately. Writes bench/results/ingest_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from common import ROOT, SHARED_BENCH, git_revision, machine, write_result

REALDOCS = SHARED_BENCH.parent / "realdocs-dev"  # ANAPHORA_BENCH_DATA points at mtrag-dev beside it
TREES = ("loki", "traefik")
SPIN = {"ANAPHORA_EMBEDDER_SPIN_WAIT": "true"}
NO_SPIN = {"ANAPHORA_EMBEDDER_SPIN_WAIT": "false"}
VARIANTS = {
    "baseline": {"precision": None, "workers": 1},
    "fp32": {"precision": "fp32", "workers": 1},
    "int8": {"precision": "int8", "workers": 1},
    "int8-workers2": {"precision": "int8", "workers": 2},
    "fp32-spin": {"precision": "fp32", "workers": 1, "env": SPIN},
    "int8-spin": {"precision": "int8", "workers": 1, "env": SPIN},
    "fp32-nospin": {"precision": "fp32", "workers": 1, "env": NO_SPIN},
    "int8-nospin": {"precision": "int8", "workers": 1, "env": NO_SPIN},
}


def copy_trees(target: Path, every: int = 1) -> list[Path]:
    """The docs trees without SOURCE.md (the corpus README says it is not part of the corpus); with ``every`` > 1
    only every ``every``-th Markdown file of each tree, in path order (a sample, for a busy machine)."""
    copies = []
    for tree in TREES:
        files = sorted(p for p in (REALDOCS / tree).rglob("*.md") if p.name != "SOURCE.md")
        for file in files[::every]:
            destination = target / tree / file.relative_to(REALDOCS / tree)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, destination)
        copies.append(target / tree)
    return copies


def chunk_count(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "anaphora.db") as db:
        return db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]


def ingest(src: Path, trees: list[Path], data_dir: Path, cache_dir: Path, spec: dict) -> dict:
    precision, workers = spec["precision"], spec["workers"]
    env = {
        **{k: v for k, v in os.environ.items() if k != "ANAPHORA_EMBEDDER_SPIN_WAIT"},
        **spec.get("env", {}),
        "PYTHONPATH": str(src),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANAPHORA_CACHE_DIR": str(cache_dir),
    }
    env.pop("ANAPHORA_EMBEDDER_PRECISION", None)
    if precision:
        env["ANAPHORA_EMBEDDER_PRECISION"] = precision
    command = [sys.executable, "-m", "anaphora", "--data-dir", str(data_dir), "ingest", *map(str, trees)]
    if workers > 1:
        command += ["--workers", str(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    chunks = chunk_count(data_dir)
    return {
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1),
        "cpu_s": round(cpu, 1),
        "cpu_ms_per_chunk": round(cpu * 1000 / chunks, 2),
        "cores_busy": round(cpu / seconds, 2),
    }


def embedder_alone(texts: list[str], cache_dir: Path, rounds: int = 2) -> dict:
    """chunks/s of the fp32 and the int8 embedder on the same texts (batch size and order as ingestion gives)."""
    from anaphora import Settings
    from anaphora.embeddings import load_embedder

    embedders = {
        precision: load_embedder(Settings(cache_dir=cache_dir, embedder_precision=precision))
        for precision in ("fp32", "int8")
    }
    for embedder in embedders.values():
        embedder.embed(texts[:32])
    times: dict[str, list[float]] = {p: [] for p in embedders}
    for _ in range(rounds):
        for precision, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed(texts)
            times[precision].append(time.perf_counter() - started)
    result = {
        p: {"chunks_per_s": round(len(texts) / min(t), 1), "runs_s": [round(x, 2) for x in t]} for p, t in times.items()
    }
    result["int8_over_fp32"] = round(result["int8"]["chunks_per_s"] / result["fp32"]["chunks_per_s"], 2)
    return result


def sample_texts(trees: list[Path], count: int, cache_dir: Path) -> list[str]:
    """The first ``count`` chunks of the trees as ingestion makes them (this tree's parser and chunker)."""
    from anaphora import Settings
    from anaphora.embeddings import load_embedder
    from anaphora.ingest.chunker import chunk_sections
    from anaphora.ingest.parsers import ParseLimits, parse_file
    from anaphora.store.sqlite_corpus import search_text

    settings = Settings(cache_dir=cache_dir)
    counter = load_embedder(settings)
    texts: list[str] = []
    for tree in trees:
        for file in sorted(tree.rglob("*.md")):
            document = parse_file(file, ParseLimits(settings.ingest.max_pdf_chars, settings.ingest.max_pdf_seconds))
            pieces = chunk_sections(
                document.sections,
                size=settings.ingest.chunk_tokens,
                overlap=settings.ingest.chunk_overlap,
                count=counter.count_tokens,
            )
            texts += [search_text(p.heading, p.text) for p in pieces]
            if len(texts) >= count:
                return texts[:count]
    return texts


def ratios(results: dict[str, list[dict]]) -> dict[str, list[float]]:
    if not results.get("baseline"):
        return {}
    return {
        f"{variant}_over_baseline": [
            round(row["chunks_per_s"] / base["chunks_per_s"], 2)
            for row, base in zip(runs, results["baseline"], strict=False)
        ]
        for variant, runs in results.items()
        if variant != "baseline" and runs
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-src", type=Path, default=Path("/tmp/26-base/src"))
    parser.add_argument("--variants", default="baseline,fp32,int8,int8-workers2")
    parser.add_argument("--embedder-sample", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--every", type=int, default=1, help="ingest every N-th file of each tree (1: all)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "bench" / ".cache" / "model-cache")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if "baseline" in variants and not (args.baseline_src / "anaphora").is_dir():
        raise SystemExit(f"no anaphora package under {args.baseline_src}: export one (see --help) or drop 'baseline'")
    results: dict[str, list[dict]] = {v: [] for v in variants}
    output = {
        "benchmark": "ingest_throughput",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine() + " (shared with other work: compare ratios within a round)",
        "command": "python bench/ingest_throughput.py " + " ".join(sys.argv[1:]),
        "trees": list(TREES),
        "every_nth_file": args.every,
        "variants": results,
        "ratios": {},
    }
    with tempfile.TemporaryDirectory(prefix="anaphora-ingest-") as scratch:
        trees = copy_trees(Path(scratch) / "docs", args.every)
        # the embedder alone first (it also makes the fp32 export and the int8 model before anything is timed)
        texts = sample_texts(trees, args.embedder_sample, args.cache_dir)
        output["embedder_alone"] = {"texts": len(texts), **embedder_alone(texts, args.cache_dir)}
        print("embedder alone", json.dumps(output["embedder_alone"]), flush=True)
        if "baseline" in variants:  # the baseline's own export (its cache name may differ)
            tiny = Path(scratch) / "tiny"
            tiny.mkdir()
            (tiny / "a.md").write_text("# Warm up\n\nOne sentence to embed.\n")
            ingest(args.baseline_src, [tiny], Path(scratch) / "data-warm", args.cache_dir, VARIANTS["baseline"])
        for round_number in range(args.rounds):
            for variant in variants:
                spec = VARIANTS[variant]
                src = args.baseline_src if variant == "baseline" else ROOT / "src"
                data_dir = Path(scratch) / f"data-{variant}-{round_number}"
                row = ingest(src, trees, data_dir, args.cache_dir, spec)
                results[variant].append(row)
                print(variant, json.dumps(row), flush=True)
                output["ratios"] = ratios(results)
                write_result("ingest_throughput", output)  # what is done so far, in case the run is cut short
    path = write_result("ingest_throughput", output)
    print(json.dumps(output["ratios"]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
