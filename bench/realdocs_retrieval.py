"""The retrieval half of bench/realdocs.py, replayed: each answerable turn's recorded queries against an ingested
realdocs corpus, under settings overrides, in seconds instead of a whole run.

    python bench/realdocs_retrieval.py [--dump FILE] [--corpus loki,traefik] [--set key=value ...]
                                       [--variant NAME=k=v,k=v ...]

``--dump`` is a ``bench/realdocs.py --diagnose --dump FILE`` run: it holds each turn's queries (the expansion and
the message, as the query stage made them); without it the queries are made here by the embedded default's query
stage, the history expansion (which reads only the user's turns). The index is the one bench/realdocs.py ingested
with the same ingest code and ``--set`` (or ``--index``). Per variant it prints, over the answerable question and
follow-up turns, the share whose gold page is among the candidates, among the passages shown to the answerer (the
selected ones and their pages' other candidates), and whose key facts are all in the shown text (the most the
answer can hold). Variants are settings overrides compared in one process (``--variant base= --variant
pool50=candidates=50``); ``page_vote=W`` is an experiment of this script (:func:`page_vote`), not a setting.
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
from anaphora.answering.extractive import ExtractiveAnswerer, same_page
from anaphora.app import aclose_components, build_components, close_local
from anaphora.pipeline.rewrite import HistoryExpansion
from anaphora.types import Message


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


async def replay(components, rows: list[dict], settings: Settings, vote: float = 0.0, answer: bool = False) -> dict:
    """The shares over ``rows``; with ``answer``, also the extractive answer's recall, answered share and gold
    citation hit (the product's answerer on the shown passages: the turn without memory or the conversation)."""
    retriever = components.retriever
    retriever.settings = settings
    answerer = ExtractiveAnswerer(components.embedder, min_relevance=settings.answers.extractive_min_relevance)
    counts = {"turns": 0, "gold_candidates": 0, "gold_shown": 0, "facts_shown": 0, "facts_groups": 0.0}
    if answer:
        counts |= {"recall": 0.0, "answered": 0, "gold_hit": 0}
    for row in rows:
        queries = row["queries"]
        candidates = page_vote(await retriever.run_many(queries, message=row["user"]), vote)
        floor = settings.retrieval.similarity_threshold
        kept = [p for p in candidates if p.dense_score is None or p.dense_score >= floor]
        selected = kept[: settings.retrieval.top_k]
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
        if answer:
            extract = await answerer.answer(queries[0], row["user"], shown)
            said = groups_in(extract.text, must) if extract else 0
            counts["recall"] += said / len(must)
            counts["answered"] += said == len(must)
            counts["gold_hit"] += bool(extract and any(p.source in gold for p in extract.quoted))
    n = counts.pop("turns") or 1
    return {key: round(value / n, 3) for key, value in counts.items()} | {"n": n}


async def expanded_rows(components, conversations: list[dict]) -> list[dict]:
    """Rows as the dump has them, each answerable turn's queries made by the embedded default's query stage (the
    history expansion: it reads the user's earlier turns only, so no answer is needed)."""
    stage = HistoryExpansion(statistics=components.passages.term_statistics)
    rows = []
    for conversation in conversations:
        history: list[Message] = []
        for index, turn in enumerate(conversation["turns"]):
            if turn["kind"] in ("question", "followup") and turn["answerable"] and turn["must"]:
                plan = await stage.run(turn["user"], history)
                rows.append(
                    {
                        "conversation": conversation["id"],
                        "corpus": conversation["corpus"],
                        "turn": index,
                        "user": turn["user"],
                        "queries": plan.queries,
                        "gold_files": turn["gold_files"],
                        "must": turn["must"],
                    }
                )
            history += [Message(role="user", content=turn["user"]), Message(role="assistant", content="")]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, default=None, help="a --diagnose dump (default: the expansion's queries)")
    parser.add_argument("--data", type=Path, default=None, help="the realdocs-dev folder (default: ../shared/bench/)")
    parser.add_argument("--corpus", default="loki,traefik")
    parser.add_argument("--set", action="append", default=[], help="a settings override for the index (key=value)")
    parser.add_argument(
        "--index",
        default=None,
        help="the ingested data dir, {corpus} for the corpus name "
        "(default: the one this tree's ingest code and --set make)",
    )
    parser.add_argument("--answer", action="store_true", help="also answer each turn with the extractive answerer")
    parser.add_argument("--variant", action="append", default=[], help="NAME=k=v,k=v: retrieval overrides to compare")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.dump.read_text().splitlines() if line] if args.dump else None
    rows = [r for r in rows if r.get("queries") and r.get("must")] if rows is not None else None
    variants = [v.partition("=")[::2] for v in args.variant] or [("base", "")]
    data = args.data or data_root()
    conversations = [json.loads(line) for line in (data / "conversations.jsonl").read_text().splitlines() if line]
    for corpus in args.corpus.split(","):
        mine = [c for c in conversations if c["corpus"] == corpus]
        if rows is not None:
            mine = [r for r in rows if r["corpus"] == corpus]
        if mine:
            index = Path(args.index.format(corpus=corpus)) if args.index else None
            asyncio.run(
                run_corpus(corpus, mine, data, parse_overrides(args.set), variants, index, rows is None, args.answer)
            )


async def run_corpus(
    corpus: str,
    rows: list[dict],
    data: Path,
    index_overrides: dict,
    variants,
    index: Path | None,
    expand: bool,
    answer: bool,
) -> None:
    """``rows``: the dump's rows of this corpus, or (``expand``) its conversations, whose queries are made here."""
    data_dir = index or prepare_corpus(Settings(**index_overrides), data / corpus, CACHE / "realdocs")[0]
    if not (data_dir / "ingest.json").exists():
        raise SystemExit(f"{data_dir} is not ingested: run bench/realdocs.py with the same --set first")
    components = build_components(Settings(**index_overrides, data_dir=data_dir))
    try:
        if expand:
            rows = await expanded_rows(components, rows)
        for name, spec in variants:
            overrides = parse_overrides([p for p in spec.split(",") if p])
            vote = float(overrides.pop("page_vote", 0.0))
            settings = Settings(**{**index_overrides, **overrides}, data_dir=data_dir)
            print(corpus, f"{name:12}", await replay(components, rows, settings, vote, answer), flush=True)
    finally:
        await aclose_components(components)
        close_local(components)


if __name__ == "__main__":
    main()
