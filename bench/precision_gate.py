"""The int8 embedder's quality gates (issue 26): every figure at int8 against fp32, paired, on the same tasks.

    python bench/precision_gate.py --realdocs-fp32 FILE --realdocs-int8 FILE

Reads what the runs left: MTRAG dev follow-up Recall@5 of each source run at both precisions
(bench/.cache/records-<domain>-<precision>.json, written by bench/followups.py), the realdocs-dev gold citation hit
(and key-fact recall, answered share) from two ``bench/realdocs.py --dump`` files, one per precision, and LoCoMo dev
memory evidence recall@10 (bench/results/precision_memory.json). A figure passes when int8 is within 1% relative
of fp32 or the paired bootstrap 95% interval of int8 minus fp32 holds 0 (the issue's rule for changing the default).
Writes bench/results/precision_gate.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import date
from pathlib import Path

from common import CACHE, RESULTS, git_revision, machine, write_result

from anaphora.evaluation.robustness import compare, paired_bootstrap

DOMAINS = ("clapnq", "fiqa")
REALDOCS_FIGURES = ("gold_hit", "recall", "answered")
MAX_RELATIVE = 0.01


def verdict(fp32: float, int8: float, ci: tuple[float, float] | list[float]) -> dict:
    relative = (int8 - fp32) / fp32 if fp32 else 0.0
    return {
        "fp32": round(fp32, 4),
        "int8": round(int8, 4),
        "relative_change": round(relative, 4),
        "int8_minus_fp32_95ci": [round(ci[0], 4), round(ci[1], 4)],
        "within_bounds": abs(relative) <= MAX_RELATIVE or ci[0] <= 0 <= ci[1],
    }


def mtrag() -> dict:
    figures = {}
    for domain in DOMAINS:
        paths = {p: CACHE / f"records-{domain}-{p}.json" for p in ("fp32", "int8")}
        if not all(path.is_file() for path in paths.values()):
            continue
        fp32, int8 = (json.loads(path.read_text()) for path in paths.values())
        for source in sorted(set(fp32) & set(int8)):
            row = compare(int8[source], fp32[source], k=5)["follow-ups"]
            figures[f"mtrag {domain} {source} follow-up R@5"] = {
                "n": row["n"],
                **verdict(row["baseline_recall@5"], row["system_recall@5"], row["ci95"]),
            }
    return figures


def realdocs(fp32_dump: Path, int8_dump: Path) -> dict:
    def turns(path: Path) -> dict[tuple, dict]:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return {(r["conversation"], r["turn"]): r for r in rows if r["run"] == "first"}

    fp32, int8 = turns(fp32_dump), turns(int8_dump)
    figures = {}
    for figure in REALDOCS_FIGURES:
        paired = [
            (float(fp32[key][figure]), float(int8[key][figure]))
            for key in fp32
            if key in int8 and fp32[key].get(figure) is not None and int8[key].get(figure) is not None
        ]
        if not paired:
            continue
        ci = paired_bootstrap([b - a for a, b in paired])
        figures[f"realdocs {figure}"] = {
            "n": len(paired),
            **verdict(statistics.fmean(a for a, _ in paired), statistics.fmean(b for _, b in paired), ci),
        }
    return figures


def locomo() -> dict:
    path = RESULTS / "precision_memory.json"
    if not path.is_file():
        return {}
    result = json.loads(path.read_text())
    recall = result["recall@10"]
    return {
        "locomo memory evidence recall@10": {
            "n": result["questions"],
            **verdict(recall["fp32"], recall["int8"], result["int8_minus_fp32_95ci"]),
        }
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--realdocs-fp32", type=Path, default=CACHE / "realdocs-fp32.jsonl")
    parser.add_argument("--realdocs-int8", type=Path, default=CACHE / "realdocs-int8.jsonl")
    args = parser.parse_args()
    figures = {**mtrag()}
    if args.realdocs_fp32.is_file() and args.realdocs_int8.is_file():
        figures.update(realdocs(args.realdocs_fp32, args.realdocs_int8))
    figures.update(locomo())
    for name, row in figures.items():
        print(
            f"{name:48} n {row['n']:4}  fp32 {row['fp32']:.4f}  int8 {row['int8']:.4f}  "
            f"rel {row['relative_change']:+.2%}  ci {row['int8_minus_fp32_95ci']}  "
            f"{'ok' if row['within_bounds'] else 'OUT'}"
        )
    output = {
        "benchmark": "precision_gate",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": "python bench/precision_gate.py",
        "rule": "int8 within 1% relative of fp32, or 0 inside the paired bootstrap 95% interval of int8 - fp32",
        "figures": figures,
        "all_within_bounds": bool(figures) and all(row["within_bounds"] for row in figures.values()),
    }
    print(f"all within bounds: {output['all_within_bounds']}")
    print(f"wrote {write_result('precision_gate', output)}")


if __name__ == "__main__":
    main()
