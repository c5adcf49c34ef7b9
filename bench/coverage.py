"""Calibrating the coverage check (``uncovered_similarity``) on realdocs-dev, leave one corpus out.

    python bench/coverage.py [--corpus loki,traefik]

For every question and follow-up turn of every conversation, the retrieval half runs as in a turn (the query stage
reads the user's earlier messages, so the assistant's answers are not needed) and records the words of the message
that no passage uses and the best dense similarity of the candidates. A turn is refused when it has such a word and
the best similarity is under the threshold. Both error kinds are counted per threshold: refusing an answerable
turn (a wrong abstention) and answering an unanswerable one (a missed refusal). The threshold is chosen on one
corpus (fewest errors, wrong abstentions weighed twice, the lowest such threshold) and scored on the other.
Results: bench/results/coverage.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from common import CACHE, git_revision, machine, write_result
from realdocs import data_root, ingest, prepare_corpus
from wordfreq import zipf_frequency

from anaphora import Settings
from anaphora.app import aclose_components, build_components, close_local
from anaphora.evaluation import retrieval_half
from anaphora.reading.coverage import asks, unused_words
from anaphora.types import Message

THRESHOLDS = [round(0.3 + 0.05 * i, 2) for i in range(15)]  # 0.30 .. 1.00
ZIPF_CUTS = (2.0, 2.5, 3.0, 3.5, 4.0, 99.0)  # a word counts when its English Zipf frequency is under the cut (99: any)


async def turns_of(name: str, conversations: list[dict], data) -> list[dict]:
    base = Settings()
    data_dir, tree = prepare_corpus(base, data / name, CACHE / "realdocs")
    components = build_components(base.model_copy(update={"data_dir": data_dir}))
    rows = []
    try:
        ingest(components, tree, data_dir)
        statistics = components.passages.term_statistics()
        half = retrieval_half(components)
        for conversation in conversations:
            history: list[Message] = []
            for index, turn in enumerate(conversation["turns"]):
                if turn["kind"] in ("question", "followup"):
                    candidates, _ = await half.run(turn["user"], history)
                    best = max((p.dense_score for p in candidates if p.dense_score is not None), default=0.0)
                    unused = unused_words(turn["user"], statistics) if asks(turn["user"]) else []
                    rows.append(
                        {
                            "corpus": name,
                            "conversation": conversation["id"],
                            "turn": index,
                            "answerable": turn["answerable"],
                            "unused": unused,
                            "zipf": [round(zipf_frequency(w, "en"), 2) for w in unused],
                            "best": round(best, 4),
                            "absent": turn.get("absent", []),
                        }
                    )
                history += [Message(role="user", content=turn["user"]), Message(role="assistant", content="")]
    finally:
        await aclose_components(components)
        close_local(components)
    return rows


def errors(rows: list[dict], setting: tuple[float, float]) -> dict:
    cut, threshold = setting
    refused = [any(z < cut for z in r["zipf"]) and r["best"] < threshold for r in rows]
    wrong = sum(1 for r, x in zip(rows, refused, strict=True) if x and r["answerable"])
    missed = sum(1 for r, x in zip(rows, refused, strict=True) if not x and not r["answerable"])
    return {
        "zipf_cut": cut,
        "threshold": threshold,
        "wrong_abstentions": wrong,
        "answerable": sum(r["answerable"] for r in rows),
        "missed_refusals": missed,
        "unanswerable": sum(not r["answerable"] for r in rows),
    }


SETTINGS = [(cut, t) for cut in ZIPF_CUTS for t in THRESHOLDS]


def choose(rows: list[dict]) -> tuple[float, float]:
    """Fewest errors, a wrong abstention counted twice (it hides an answer the docs have); then the strictest
    word rule and the lowest threshold (refuse as little as the errors allow)."""

    def cost(setting: tuple[float, float]) -> tuple[int, float, float]:
        e = errors(rows, setting)
        return 2 * e["wrong_abstentions"] + e["missed_refusals"], setting[0], setting[1]

    return min(SETTINGS, key=cost)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="loki,traefik")
    parser.add_argument("--reuse", type=Path, nargs="*", default=[], help="earlier results whose turns are kept")
    args = parser.parse_args()
    data = data_root()
    conversations = [json.loads(line) for line in (data / "conversations.jsonl").read_text().splitlines() if line]
    rows: list[dict] = [row for path in args.reuse for row in json.loads(path.read_text())["turns"]]
    for row in rows:  # results written before the word frequencies were recorded
        row.setdefault("zipf", [round(zipf_frequency(w, "en"), 2) for w in row["unused"]])
    corpora = args.corpus.split(",")
    for name in corpora:
        if not any(r["corpus"] == name for r in rows):
            rows += asyncio.run(turns_of(name, [c for c in conversations if c["corpus"] == name], data))
    for row in rows:
        if row["unused"] or not row["answerable"]:
            print(json.dumps(row))
    sweep = {name: [errors([r for r in rows if r["corpus"] == name], st) for st in SETTINGS] for name in corpora}
    held_out = {}
    for tuned in corpora:
        for scored in corpora:
            if scored != tuned:
                t = choose([r for r in rows if r["corpus"] == tuned])
                held_out[f"tuned on {tuned}, scored on {scored}"] = errors(
                    [r for r in rows if r["corpus"] == scored], t
                )
    result = {
        "revision": git_revision(),
        "machine": machine(),
        "both": errors(rows, choose(rows)),
        "leave_one_corpus_out": held_out,
        "sweep": sweep,
        "turns": rows,
    }
    for label, value in held_out.items():
        print(label, json.dumps(value))
    print("chosen on both:", json.dumps(result["both"]))
    print(f"wrote {write_result('coverage', result)}")


if __name__ == "__main__":
    main()
