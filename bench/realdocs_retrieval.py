"""The retrieval half of bench/realdocs.py, replayed: each answerable turn's recorded queries against an ingested
realdocs corpus, under settings overrides, in seconds instead of a whole run.

    python bench/realdocs_retrieval.py --dump FILE [--corpus loki,traefik] [--set key=value ...]
                                       [--variant NAME=k=v,k=v ...]

``--dump`` is a ``bench/realdocs.py --diagnose --dump FILE`` run: it holds each turn's queries (the expansion and
the message, as the query stage made them). The index is the one that run ingested (the same fingerprint: run it
from the same tree). Per variant it prints, over the answerable question/follow-up turns, the share whose gold page
is among the candidates, among the passages shown to the answerer (the selected ones and their pages' other
candidates), and whose key facts are all in the shown text (the most the answer can hold). Variants are settings
overrides compared in one process (``--variant base= --variant pool50=candidates=50``); ``page_vote=W`` is an
experiment of this script (:func:`page_vote`), not a setting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from common import CACHE
from realdocs import data_root, parse_overrides, prepare_corpus
from realdocs_loss import groups_in

from anaphora import Settings
from anaphora.app import aclose_components, build_components, close_local
from anaphora.pipeline.extractive import same_page


def page_vote(candidates: list, weight: float) -> list:
    """Experiment: each candidate's score plus ``weight`` times the scores of the other candidates of its page (a
    page many candidates come from is the page the question is about), re-sorted."""
    if not weight or not candidates:
        return candidates
    top = max(p.score for p in candidates) or 1.0
    by_page: dict[str, float] = {}
    for p in candidates:
        by_page[p.source] = by_page.get(p.source, 0.0) + p.score / top
    voted = {p.id: p.score / top + weight * (by_page[p.source] - p.score / top) for p in candidates}
    return sorted(candidates, key=lambda p: -voted[p.id])


async def replay(components, rows: list[dict], settings: Settings, vote: float = 0.0) -> dict:
    retriever = components.retriever
    retriever.settings = settings
    counts = {"turns": 0, "gold_candidates": 0, "gold_shown": 0, "facts_shown": 0, "facts_groups": 0.0}
    for row in rows:
        queries = row["queries"]
        candidates = page_vote(await retriever.run_many(queries, message=row["user"]), vote)
        kept = [p for p in candidates if p.dense_score is None or p.dense_score >= settings.similarity_threshold]
        selected = kept[: settings.top_k]
        shown = [*selected, *same_page(kept, selected)]
        gold = set(row["gold_files"])
        must = row["must"]
        text = "\n".join(p.text for p in shown)
        counts["turns"] += 1
        counts["gold_candidates"] += any(p.source in gold for p in candidates)
        counts["gold_shown"] += any(p.source in gold for p in shown)
        held = groups_in(text, must)
        counts["facts_shown"] += held == len(must)
        counts["facts_groups"] += held / len(must)
    n = counts.pop("turns") or 1
    return {key: round(value / n, 3) for key, value in counts.items()} | {"n": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=None, help="the realdocs-dev folder (default: ../shared/bench/)")
    parser.add_argument("--corpus", default="loki,traefik")
    parser.add_argument("--set", action="append", default=[], help="a settings override for the index (key=value)")
    parser.add_argument(
        "--index",
        default=None,
        help="the ingested data dir, {corpus} for the corpus name "
        "(default: the one this tree's ingest code and --set make)",
    )
    parser.add_argument("--variant", action="append", default=[], help="NAME=k=v,k=v: retrieval overrides to compare")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.dump.read_text().splitlines() if line]
    rows = [r for r in rows if r.get("queries") and r.get("must")]
    variants = [v.partition("=")[::2] for v in args.variant] or [("base", "")]
    data = args.data or data_root()
    for corpus in args.corpus.split(","):
        mine = [r for r in rows if r["corpus"] == corpus]
        if mine:
            index = Path(args.index.format(corpus=corpus)) if args.index else None
            asyncio.run(run_corpus(corpus, mine, data, parse_overrides(args.set), variants, index))


async def run_corpus(
    corpus: str, rows: list[dict], data: Path, index_overrides: dict, variants, index: Path | None
) -> None:
    data_dir = index or prepare_corpus(Settings(**index_overrides), data / corpus, CACHE / "realdocs")[0]
    if not (data_dir / "ingest.json").exists():
        raise SystemExit(f"{data_dir} is not ingested: run bench/realdocs.py with the same --set first")
    components = build_components(Settings(**index_overrides, data_dir=data_dir))
    try:
        for name, spec in variants:
            overrides = parse_overrides([p for p in spec.split(",") if p])
            vote = float(overrides.pop("page_vote", 0.0))
            settings = Settings(**{**index_overrides, **overrides}, data_dir=data_dir)
            print(corpus, f"{name:12}", await replay(components, rows, settings, vote), flush=True)
    finally:
        await aclose_components(components)
        close_local(components)


if __name__ == "__main__":
    main()
