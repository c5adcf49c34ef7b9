"""Peak memory and time of ingesting one large text file: 1, 10 and 100 MB.

    python bench/ingest_memory.py [--sizes 1,10,100] [--embedder hashing] [--no-breaks]

Each size runs in a fresh process (peak RSS is the child's ru_maxrss), on a generated English-like .txt file:
sentences of 8-20 words, a blank line after about one sentence in five; with ``--no-breaks``, one single line of
words without sentence ends either (minified text, a log line, CSV), which the chunker must cut at words.
The default embedder is the model-free ``hashing`` one, so the numbers are the framework's own cost (parse,
chunk, store); ``--embedder`` names another (e.g. ``onnx``) to include real tokenization and embedding. The
file-size limit is raised above the largest size, so that every size is ingested; with the default
``max_file_bytes`` (64 MB) the 100 MB file is skipped as too large instead.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from common import git_revision, machine, write_result

MB = 1_000_000
WORDS = (
    "kestrel install helm chart kubernetes arm node cluster upgrade version config release image registry "
    "the a of to and in is on with for from by it that this be as are"
).split()


def write_text(path: Path, size: int, *, breaks: bool) -> None:
    rng = random.Random(16)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size:
            sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20)))
            if not breaks:
                sentence += " "
            elif rng.random() < 0.2:
                sentence = sentence.capitalize() + ".\n\n"
            else:
                sentence = sentence.capitalize() + ". "
            out.write(sentence)
            written += len(sentence)


CHILD = """
import json, resource, sys, time
from anaphora.app import Anaphora
from anaphora.settings import Settings
path, data_dir, embedder, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
settings = Settings(data_dir=data_dir, chat_model="fake", embedder=embedder, max_file_bytes=limit)
with Anaphora(settings) as rag:
    started = time.perf_counter()
    report = rag.ingest([path])
    seconds = time.perf_counter() - started
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_mb, "chunks": report.chunks_written,
                  "skipped": report.skipped}))
"""


def measure(path: Path, embedder: str, limit: int) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), data_dir, embedder, str(limit)],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline(embedder: str) -> float:
    """Peak RSS of the same process ingesting nothing: the interpreter and the imports."""
    with tempfile.TemporaryDirectory() as empty:
        return measure(Path(empty), embedder, MB)["peak_rss_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,10,100", help="file sizes in MB, comma-separated")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--no-breaks", action="store_true", help="one line of words: no line breaks, no sentences")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    base = baseline(args.embedder)
    print(f"baseline (imports, empty ingest): {base:.0f} MB peak RSS")
    print("| size | seconds | MB/s | peak RSS | above baseline | chunks |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            path = Path(scratch) / f"text-{size}mb.txt"
            write_text(path, size * MB, breaks=not args.no_breaks)
            started = time.perf_counter()
            result = measure(path, args.embedder, limit=(max(sizes) + 1) * MB)
            result["wall_seconds"] = time.perf_counter() - started
            result["size_mb"] = size
            rows.append(result)
            path.unlink()
            print(
                f"| {size} MB | {result['seconds']:.1f} | {size / result['seconds']:.2f} | "
                f"{result['peak_rss_mb']:.0f} MB | {result['peak_rss_mb'] - base:.0f} MB | {result['chunks']} |"
            )
    command = "python bench/ingest_memory.py " + " ".join(sys.argv[1:])
    write_result(
        "ingest_memory" + ("_no_breaks" if args.no_breaks else ""),
        {"command": command.strip(), "date": date.today().isoformat(), "revision": git_revision(),
         "machine": machine(), "embedder": args.embedder, "baseline_mb": base, "breaks": not args.no_breaks,
         "rows": rows},
    )  # fmt: skip


if __name__ == "__main__":
    main()
