"""Several runs of ``bench/load.py --routes ...`` for two source trees, reduced to each route's medians.

    python bench/load_compare.py --command "python bench/load.py --routes chat,responses,conversations ..." \
        --before run1.json run2.json ... --after run1.json run2.json ... [--name load_routes_compare]

Each file is one run's bench/results/load_routes.json (copied away after the run); the runs of the two trees should
alternate, so that the machine's other load weighs on both alike. Writes bench/results/<name>.json: per tree and
route, every run's figures and their median (route overhead = latency minus the engine's Server-Timing; a tree
without that header has none), and each route's overheads over the chat route's in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import date
from pathlib import Path

from common import git_revision, machine, write_result

FIGURES = {  # name: where a run's result holds it
    "latency_p50": ("latency_ms", "p50"),
    "route_overhead_p50": ("route_overhead_ms", "p50"),
    "route_overhead_p95": ("route_overhead_ms", "p95"),
    "service_overhead_p50": ("service_overhead_ms", "p50"),
    "service_overhead_p95": ("service_overhead_ms", "p95"),
    "engine_outside_stages_p50": ("engine_outside_stages_ms", "p50"),
    "server_cpu_ms_per_turn": ("server_cpu_ms_per_turn", None),
    "turns_per_s": ("turns_per_s", None),
}


def figure(measured: dict, where: tuple[str, str | None]) -> float | None:
    value = measured.get(where[0])
    if where[1] is not None:
        value = (value or {}).get(where[1]) if (value or {}).get("n") else None
    return value


def reduce(paths: list[Path]) -> dict:
    """route: {figure: {"runs": [...], "median": ...}} over the runs in ``paths``."""
    runs = [json.loads(path.read_text()) for path in paths]
    routes: dict[str, dict] = {}
    for run in runs:
        for route, measured in run["routes"].items():
            for name, where in FIGURES.items():
                routes.setdefault(route, {}).setdefault(name, {"runs": []})["runs"].append(figure(measured, where))
    if "chat" in routes:  # within each run, against the route that stores nothing: the machine's load cancels out
        for figures in routes.values():
            for name in ("route_overhead_p50", "service_overhead_p50"):
                pairs = zip(figures[name]["runs"], routes["chat"][name]["runs"], strict=True)
                figures[f"{name}_to_chat"] = {"runs": [mine / chat if mine and chat else None for mine, chat in pairs]}
    for figures in routes.values():
        for values in figures.values():
            known = [v for v in values["runs"] if v is not None]
            values["median"] = round(statistics.median(known), 3) if known else None
    return {"settings": runs[0]["settings"], "errors": [run["routes"] for run in runs if any(
        m["errors"] for m in run["routes"].values())], "routes": routes}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--command", required=True, help="the load.py command every run used")
    parser.add_argument("--before", nargs="+", type=Path, required=True)
    parser.add_argument("--after", nargs="+", type=Path, required=True)
    parser.add_argument("--before-label", default="before")
    parser.add_argument("--after-label", default="after")
    parser.add_argument("--name", default="load_routes_compare")
    args = parser.parse_args()
    before, after = reduce(args.before), reduce(args.after)
    result = {
        "benchmark": "load_compare",
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": args.command,
        "repetitions": {"before": len(args.before), "after": len(args.after)},
        "labels": {"before": args.before_label, "after": args.after_label},
        "settings": after.pop("settings"),
        "before": before,
        "after": after,
    }
    before.pop("settings")
    print(json.dumps({side: {r: {k: v["median"] for k, v in f.items()} for r, f in result[side]["routes"].items()}
                      for side in ("before", "after")}, indent=2))  # fmt: skip
    print(f"wrote {write_result(args.name, result)}")


if __name__ == "__main__":
    main()
