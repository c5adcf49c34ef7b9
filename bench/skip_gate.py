"""RAG-skip gate and router on conversations that include chit-chat and meta turns.

    python bench/skip_gate.py [--domains clapnq,fiqa] [--rewriter expansion|model]

The MTRAG dev conversations have only information-seeking turns, so this script interleaves social and
conversation-level turns into them (after every second user turn, from a fixed list written independently of the
router's rules), keeping the original turns' gold passages. It replays every turn through the pipeline with the
gate on and off and reports: the share of retrievals skipped, how many original (retrieval-needing) turns were
wrongly skipped, and Recall@5 / nDCG@5 on the original follow-ups with and without the gate.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import defaultdict
from datetime import date

from common import CACHE, domain_paths, git_revision, machine, write_result

from anaphora import Settings
from anaphora.app import build_components
from anaphora.evaluation import Task, load_tasks, replay, retrieval_half
from anaphora.evaluation.metrics import ndcg_at, recall_at
from anaphora.types import Message

INSERTS = [  # (user turn, assistant reply)
    ("Thanks, that helps a lot!", "You're welcome."),
    ("ok great", "Glad it helps."),
    ("Cool, makes sense.", "Great."),
    ("Can you summarize what we discussed so far?", "We talked about the topics above."),
    ("Could you say that again, but shorter?", "In short: see above."),
    ("What was my first question?", "You first asked about the topic above."),
    ("Thank you!", "Any time."),
    ("Hmm, interesting. Can you repeat that?", "Sure, as I said above."),
]


def interleave(tasks: list[Task]) -> list[Task]:
    conversations: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        conversations[task.task_id.split("<::>")[0]].append(task)
    out: list[Task] = []
    for cid, turns in conversations.items():
        turns.sort(key=lambda t: t.turn_number)
        positions: dict[int, list[Message]] = {}  # inserted messages, by the original turn they follow
        seed = int(hashlib.sha256(cid.encode()).hexdigest(), 16)
        for number, task in enumerate(turns, start=1):
            history = []
            originals = task.history
            for i in range(0, len(originals), 2):
                history.extend(originals[i : i + 2])
                history.extend(positions.get(i // 2 + 1, []))
            out.append(task.model_copy(update={"history": history}))
            if number % 2 == 0:
                user, reply = INSERTS[(seed + number) % len(INSERTS)]
                turn_history = [
                    *history,
                    Message(role="user", content=task.question),
                    Message(role="assistant", content=task.answer or "..."),
                ]
                out.append(
                    Task(
                        task_id=f"{cid}<::>{number}+social",
                        history=turn_history,
                        question=user,
                        turn=task.turn_number + 1,
                        gold=None,
                    )
                )
                positions[number] = [Message(role="user", content=user), Message(role="assistant", content=reply)]
    return out


def score_run(records: list[dict]) -> dict:
    social = [r for r in records if r["task_id"].endswith("+social")]
    original = [r for r in records if not r["task_id"].endswith("+social")]
    follow_ups = [r for r in original if r["turn"] > 1 and r["gold"]]
    mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
    return {
        "turns": len(records),
        "retrievals_skipped_share": mean([1.0 if r["skipped"] else 0.0 for r in records]),
        "social_turns": len(social),
        "social_skipped_share": mean([1.0 if r["skipped"] else 0.0 for r in social]),
        "original_turns_wrongly_skipped": sum(1 for r in original if r["skipped"]),
        "followup_recall@5": mean([recall_at([x["id"] for x in r["ranked"]], r["gold"], 5) for r in follow_ups]),
        "followup_ndcg@5": mean([ndcg_at([x["id"] for x in r["ranked"]], r["gold"], 5) for r in follow_ups]),
        "model_calls_per_turn": mean([r["model_calls"] for r in records]),
    }


async def run_domain(domain: str, rewriter: str) -> dict:
    corpus, tasks_path = domain_paths(domain)
    settings = Settings(data_dir=CACHE / domain, rewriter=rewriter)
    results = {}
    tasks = interleave(load_tasks(tasks_path))
    for gate in (True, False):
        components = build_components(settings.with_updates(skip_gate=gate))
        components.ingestor.run([corpus])
        records = await replay(retrieval_half(components), tasks, "pipeline")
        results["gate on" if gate else "gate off"] = score_run(records)
        print(domain, "gate", gate, json.dumps(results["gate on" if gate else "gate off"]), flush=True)
        components.database.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", default="clapnq,fiqa")
    parser.add_argument("--rewriter", default="expansion")
    args = parser.parse_args()
    output = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "rewriter": args.rewriter,
        "domains": {},
    }
    for domain in args.domains.split(","):
        output["domains"][domain] = asyncio.run(run_domain(domain, args.rewriter))
    print(f"wrote {write_result('skip_gate', output)}")


if __name__ == "__main__":
    main()
