"""The router's recognition of turns about the conversation, on a labelled example set with a held-out part.

    python bench/intents.py [--split tune|held-out|all] [--show-errors]

The examples (tests/data/conversation_intents.jsonl) were written for this purpose, several phrasings per intent
(chit_chat, shorten, repeat, point_back, recap) and hard negatives that must go to retrieval (``documents``:
"summarize the upgrade guide", "how do I shorten the retention window?"). The rules were tuned on the ``tune``
part only; the ``held-out`` figure is the one to quote. Results go to bench/results/intents.json.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from common import git_revision, machine, write_result

from anaphora.reading.intents import recognise

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "data" / "conversation_intents.jsonl"


def predicted(text: str) -> str:
    request = recognise(text)
    return "documents" if request is None or request.tentative else request.intent.value


def score(rows: list[dict]) -> dict:
    """Accuracy over all intents, and the two errors that matter most: a documents question kept from retrieval
    (it gets no answer from the docs) and a request about the conversation sent to retrieval."""
    confusion: Counter[tuple[str, str]] = Counter()
    for row in rows:
        confusion[(row["intent"], predicted(row["text"]))] += 1
    total = sum(confusion.values())
    right = sum(n for (gold, got), n in confusion.items() if gold == got)
    documents = sum(n for (gold, _), n in confusion.items() if gold == "documents")
    kept_from_docs = sum(n for (gold, got), n in confusion.items() if gold == "documents" and got != "documents")
    about = total - documents
    sent_to_docs = sum(n for (gold, got), n in confusion.items() if gold != "documents" and got == "documents")
    return {
        "n": total,
        "accuracy": round(right / total, 4),
        "documents_kept_from_retrieval": f"{kept_from_docs}/{documents}",
        "conversation_turns_sent_to_retrieval": f"{sent_to_docs}/{about}",
        "per_intent": {
            gold: f"{confusion[(gold, gold)]}/{sum(n for (g, _), n in confusion.items() if g == gold)}"
            for gold in sorted({g for g, _ in confusion})
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="all", choices=["tune", "held-out", "all"])
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    splits = ["tune", "held-out"] if args.split == "all" else [args.split]
    result = {"revision": git_revision(), "machine": machine(), "examples": str(EXAMPLES.name), "splits": {}}
    for split in splits:
        part = [r for r in rows if r["split"] == split]
        result["splits"][split] = score(part)
        print(f"{split:9s} {json.dumps(result['splits'][split])}")
        if args.show_errors:
            for row in part:
                got = predicted(row["text"])
                if got != row["intent"]:
                    print(f"   {row['intent']:10s} -> {got:10s} {row['text']!r}")
    if args.split == "all":
        write_result("intents", result)


if __name__ == "__main__":
    main()
