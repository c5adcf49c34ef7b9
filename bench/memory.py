"""Cross-session memory on a LoCoMo-format folder: evidence recall of the memory stage against every-turn baselines,
write and recall cost, and recall latency for a user with 6,000 remembered turns.

    python bench/memory.py --data ../shared/bench/locomo-dev --report bench/results/memory.json [--limit N]

Each session of a conversation is fed, in order, as its own conversation of one user (one utterance a turn, the
speaker's name kept in the text, the session's date as the turn's time) through the real writer
(:class:`~anaphora.memory.writer.TurnRecorder`) into a fresh SQLite memory store; then each question is asked of
that user's memory through the real recall (:class:`~anaphora.memory.recall.MemoryRecall`). The questions carry no
date of their own, and their "last year" means the conversation's, so no "now" is given (only a year they name
counts). Evidence recall@k counts the *source turns* of the recalled items in rank order (an item citing
3 turns uses 3 of the k; a turn already counted costs nothing again), categories 1-4 with evidence.

Baselines in the same run, every past turn as a unit ("{date_time} {speaker}: {text}", the question as the query):
(a) MiniLM cosine, (b) BM25 (bm25s, English stop-words, Snowball), (c) their RRF (dense 1 : BM25 0.5, k = 60).
Nothing here knows the data set beyond its file format.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
from common import CACHE, git_revision, machine, summary_ms

from anaphora.app import build_components, limit_blas_threads
from anaphora.embeddings import CachedEmbedder, load_embedder
from anaphora.memory.recall import MemoryRecall, RecallWeights
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.writer import TurnRecorder, TurnToRemember
from anaphora.model_defaults import answer_mode
from anaphora.models.base import ModelCapabilities
from anaphora.models.fake import FakeChatModel
from anaphora.pipeline.check import ABSTAIN
from anaphora.pipeline.state import TurnRequest
from anaphora.retrieval.bm25 import BM25Index
from anaphora.settings import Settings
from anaphora.store import Database, SQLiteEmbeddingCache

KS = (5, 10)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_MARKERS = re.compile(r"\[[^\[\]\n]*\]")  # citation markers ([memory:...], [doc#1]) and date notes
_PUNCTUATION = re.compile(r"[^\w\s]")


def normalise(text: str) -> list[str]:
    """LoCoMo's answer normalisation: lower-case, no punctuation, no articles (and no citation markers)."""
    text = _PUNCTUATION.sub(" ", _MARKERS.sub(" ", text.lower().replace(",", "")))
    return _ARTICLES.sub(" ", text).split()


def token_f1(prediction: str, reference: str) -> float:
    predicted, gold = normalise(prediction), normalise(reference)
    common = sum(min(predicted.count(w), gold.count(w)) for w in set(predicted) & set(gold))
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}


def parse_when(text: str) -> float:
    """A session date like '1:56 pm on 8 May, 2023' as a UTC timestamp."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def utterance(turn: dict) -> str:
    caption = turn.get("image_caption") or turn.get("blip_caption")
    shared = f" [shares a photo: {caption}]" if caption else ""
    return f"{turn['speaker']}: {turn['text']}{shared}"


def load(folder: Path) -> tuple[list[dict], list[dict]]:
    conversations = [json.loads(line) for line in (folder / "conversations.jsonl").open() if line.strip()]
    questions = [json.loads(line) for line in (folder / "questions.jsonl").open() if line.strip()]
    return conversations, questions


def evidence_recall(ranked_turns: list[str], evidence: list[str], k: int) -> float:
    first = list(dict.fromkeys(ranked_turns))[:k]
    return len(set(first) & set(evidence)) / len(set(evidence))


async def feed(recorder: TurnRecorder, sample: dict) -> tuple[dict[tuple[str, int], str], list[float], list[float]]:
    """Write every session of ``sample`` into its user's memory; returns (conversation, turn) -> dia_id and the
    write CPU ms per turn, whole (the recorder's embedder may answer from its cache) and of the rules alone."""
    dia: dict[tuple[str, int], str] = {}
    cpu_ms: list[float] = []
    rules_ms: list[float] = []
    user = sample["sample_id"]
    for session in sample["sessions"]:
        conversation = f"{user}-s{session['session']}"
        when = parse_when(session["date_time"])
        previous = ""
        for index, turn in enumerate(session["turns"]):
            dia[(conversation, index)] = turn["dia_id"]
            remembered = TurnToRemember(user, conversation, index, utterance(turn), when, context=previous)
            started = time.process_time()
            await recorder.record(remembered)
            cpu_ms.append((time.process_time() - started) * 1000)
            started = time.process_time()
            recorder.items(remembered)
            rules_ms.append((time.process_time() - started) * 1000)
            previous = remembered.question
    return dia, cpu_ms, rules_ms


def baseline_rankings(embedder, sample: dict, questions: list[dict]) -> dict[str, list[list[str]]]:
    units, ids = [], []
    for session in sample["sessions"]:
        for turn in session["turns"]:
            units.append(f"{session['date_time']} {turn['speaker']}: {turn['text']}")
            ids.append(turn["dia_id"])
    unit_vectors = embedder.embed(units)
    query_vectors = embedder.embed([q["question"] for q in questions])
    bm25 = BM25Index.build(np.arange(len(units)), units)
    out: dict[str, list[list[str]]] = {"(a) MiniLM cosine": [], "(b) BM25": [], "(c) RRF": []}
    for q, vector in zip(questions, query_vectors, strict=True):
        dense = list(np.argsort(-(unit_vectors @ vector), kind="stable")[:50])
        lexical = [key for key, _ in bm25.search(q["question"], 50)]
        rrf: dict[int, float] = defaultdict(float)
        for rank, i in enumerate(dense, 1):
            rrf[int(i)] += 1.0 / (60 + rank)
        for rank, i in enumerate(lexical, 1):
            rrf[int(i)] += 0.5 / (60 + rank)
        fused = sorted(rrf, key=lambda i: -rrf[i])
        out["(a) MiniLM cosine"].append([ids[i] for i in dense])
        out["(b) BM25"].append([ids[i] for i in lexical])
        out["(c) RRF"].append([ids[i] for i in fused])
    return out


def score(rankings: list[list[str]], questions: list[dict]) -> dict:
    per: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for ranked, q in zip(rankings, questions, strict=True):
        if q["category"] == 5 or not q.get("evidence"):
            continue
        for k in KS:
            value = evidence_recall(ranked, q["evidence"], k)
            per["overall"][k].append(value)
            per[CATEGORIES[q["category"]]][k].append(value)
    return {
        group: {f"recall@{k}": round(statistics.fmean(v), 4) for k, v in by_k.items()} | {"n": len(by_k[KS[0]])}
        for group, by_k in per.items()
    }


async def write_cost(embedder, sample: dict, turns: int = 300) -> dict:
    """CPU ms per turn of a whole write with the episode's embedding computed (no cache), on the first turns of
    ``sample``: process time, so the embedder's threads count too."""
    with tempfile.TemporaryDirectory() as directory:
        db = Database(Path(directory) / "memory.db")
        recorder = TurnRecorder(SQLiteMemoryStore(db), embedder)
        timings: list[float] = []
        previous = ""
        done = 0
        for session in sample["sessions"]:
            when = parse_when(session["date_time"])
            for index, turn in enumerate(session["turns"]):
                remembered = TurnToRemember("w", f"s{session['session']}", index, utterance(turn), when, previous)
                started = time.process_time()
                await recorder.record(remembered)
                timings.append((time.process_time() - started) * 1000)
                previous = remembered.question
                done += 1
                if done == turns:
                    db.close()
                    return summary_ms(timings)
        db.close()
    return summary_ms(timings)


async def synthetic_latency(embedder, turns: int, utterances: list[str], questions: list[str]) -> dict:
    """Recall latency for one user with ``turns`` remembered turns (the dev utterances, repeated under new
    conversation ids until there are enough), each question embedded anew (its text made new)."""
    with tempfile.TemporaryDirectory() as directory:
        db = Database(Path(directory) / "memory.db")
        store = SQLiteMemoryStore(db)
        recorder = TurnRecorder(store, None)
        pool_vectors = embedder.embed(utterances)
        items = []
        for n in range(turns):
            turn = TurnToRemember("synthetic", f"c{n // 30}", n % 30, utterances[n % len(utterances)], 1.7e9 + n)
            items.append(recorder.items(turn)[0][0])
        await store.add("synthetic", items, np.stack([pool_vectors[n % len(utterances)] for n in range(turns)]))
        recall = MemoryRecall(store, embedder)
        await recall.rank("synthetic", questions[0])  # builds the user's index once (then kept in step)
        timings = []
        for n, question in enumerate(questions[:200]):
            started = time.perf_counter()
            await recall.rank("synthetic", f"{question} ({n})")
            timings.append((time.perf_counter() - started) * 1000)
        db.close()
    return {"turns": turns, **summary_ms(timings)}


ABLATIONS = {  # one part of the memory stage left out at a time
    "without neighbour smoothing": {"neighbour_weight": 0.0},
    "without pseudo-relevance feedback": {"feedback_items": 0},
    "without the name boost": {"name_boost": 0.0},
    "dense and BM25 weighted equally": {"dense_weight": 1.0},
}


async def ablations(embedder, conversations: list[dict], asked: list[dict]) -> dict:
    """Evidence recall of the memory stage with one of its parts left out (and, last, with the episodes' vectors
    of the turn alone, without its context)."""
    out: dict[str, dict] = {}
    for contextual in (True, False):
        with tempfile.TemporaryDirectory() as directory:
            db = Database(Path(directory) / "memory.db")
            store = SQLiteMemoryStore(db)
            recorder = TurnRecorder(store, embedder, contextual=contextual)
            dias = {s["sample_id"]: (await feed(recorder, s))[0] for s in conversations}
            variants = ABLATIONS if contextual else {"episode vectors without the previous turn": {}}
            for name, change in variants.items():
                recall = MemoryRecall(store, embedder, RecallWeights(**change))
                rankings = []
                for q in asked:
                    recalled = await recall.rank(q["sample_id"], q["question"])
                    dia = dias[q["sample_id"]]
                    rankings.append([dia[(r.item.conversation_id, t)] for r in recalled for t in r.item.turns])
                out[name] = score(rankings, asked)["overall"]
            db.close()
    return out


async def answer_questions(directory: str, args, conversations: list[dict], asked: list[dict], recorder_embedder):
    """Answers through the real engine in the default answer mode of the embedded model (``extractive``: quoted
    from the documents or the recalled memories, no model call). There are no documents, so what is quoted comes
    from memory. Questions are asked statelessly (a new empty conversation that is not stored), so no question is
    remembered into the next one's memory."""
    settings = Settings(data_dir=Path(directory) / "engine", chat_model="embedded", embedder="minilm")
    embedded = ModelCapabilities(
        in_process=True, reliable_answers=False, extracts_facts=False
    )  # what embedded declares
    model = FakeChatModel(default="(the model was called)", capabilities=embedded)
    components = build_components(settings, model=model)
    engine, recorder = components.engine, TurnRecorder(components.memory, recorder_embedder)
    for sample in conversations:
        await feed(recorder, sample)
    f1: dict[str, list[float]] = defaultdict(list)
    adversarial: list[bool] = []
    memory_tokens: list[float] = []
    stage_ms: list[float] = []
    sources: dict[str, int] = defaultdict(int)
    limit = args.answer_limit or len(asked)
    for q in [q for q in asked if q["category"] in CATEGORIES][:limit]:
        result = await engine.ask(TurnRequest(q["question"], user_id=q["sample_id"], history=[]))
        sources[result.trace.answer_source] += 1
        memory_tokens.append(float(result.trace.budget.memory if result.trace.budget else 0))
        record = result.trace.stage("memory")
        if record is not None:
            stage_ms.append(record.ms)
        if q["category"] == 5:
            adversarial.append(result.answer.strip() == ABSTAIN)
        elif q.get("answer") is not None:
            value = token_f1(result.answer, str(q["answer"]))
            f1["overall"].append(value)
            f1[CATEGORIES[q["category"]]].append(value)
    await engine.drain()
    components.database.close()
    return {
        "answer_mode": answer_mode(settings.answers, model.capabilities),
        "questions": sum(sources.values()),
        "token_f1": {group: round(statistics.fmean(v), 4) for group, v in f1.items()},
        "adversarial_abstention_rate": round(statistics.fmean(adversarial), 4) if adversarial else None,
        "memory_tokens_per_prompt": summary_ms(memory_tokens),
        "answer_sources": dict(sources),
        "memory_stage_ms_in_turns": summary_ms(stage_ms),
        "model_calls": len(model.calls),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0, help="questions per conversation (0: all)")
    parser.add_argument("--synthetic-turns", type=int, default=6000)
    parser.add_argument("--no-synthetic", action="store_true", help="skip the 6,000-turn latency run")
    parser.add_argument("--answer-limit", type=int, default=0, help="questions answered through the engine (0: all)")
    parser.add_argument("--no-ablations", action="store_true", help="skip the runs with one part left out")
    args = parser.parse_args()

    settings = Settings(embedder="minilm")
    limit_blas_threads(settings.models.blas_threads)  # as the product does
    CACHE.mkdir(parents=True, exist_ok=True)
    cache_db = Database(CACHE / "memory_embeddings.db")
    embedder = CachedEmbedder(load_embedder(settings), SQLiteEmbeddingCache(cache_db, max_entries=1_000_000))
    conversations, questions = load(args.data)
    ranked: dict[str, list[list[str]]] = defaultdict(list)
    asked: list[dict] = []
    rules_ms: list[float] = []
    recall_ms: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        db = Database(Path(directory) / "memory.db")
        store = SQLiteMemoryStore(db)
        recorder = TurnRecorder(store, embedder)
        recall = MemoryRecall(store, embedder)
        for sample in conversations:
            user = sample["sample_id"]
            dia, _, rules = await feed(recorder, sample)
            rules_ms += rules
            mine = [q for q in questions if q["sample_id"] == user]
            if args.limit:
                mine = mine[: args.limit]
            for name, rankings in baseline_rankings(embedder, sample, mine).items():
                ranked[name] += rankings
            for q in mine:
                started = time.perf_counter()
                recalled = await recall.rank(user, q["question"])
                recall_ms.append((time.perf_counter() - started) * 1000)
                ranked["memory stage"].append(
                    [dia[(r.item.conversation_id, t)] for r in recalled for t in r.item.turns]
                )
            asked += mine
        db.close()
        answers = await answer_questions(directory, args, conversations, asked, recorder_embedder=embedder)
    results = {name: score(r, asked) for name, r in ranked.items()}
    baseline = results["(c) RRF"]["overall"]["recall@10"]
    ours = results["memory stage"]["overall"]["recall@10"]
    report = {
        "date": date.today().isoformat(),
        "revision": git_revision(),
        "machine": machine(),
        "command": "python bench/memory.py " + " ".join(sys.argv[1:]),
        "questions": len(asked),
        "evidence_recall": results,
        "gain_over_rrf_at_10": round(ours / baseline - 1, 4) if baseline else None,
        "write_cpu_ms_per_turn": await write_cost(load_embedder(settings), conversations[0]),
        "write_cpu_ms_per_turn_without_embedder": summary_ms(rules_ms),
        "recall_ms_query_embedding_cached": summary_ms(recall_ms),
        "answers": answers,
        "ablations": {} if args.no_ablations else await ablations(embedder, conversations, asked),
        "synthetic_user": None
        if args.no_synthetic
        else await synthetic_latency(
            embedder,
            args.synthetic_turns,
            [utterance(t) for c in conversations for s in c["sessions"] for t in s["turns"]],
            [q["question"] for q in questions],
        ),
    }
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2))
    print(
        json.dumps(
            {k: report[k] for k in ("evidence_recall", "gain_over_rrf_at_10", "answers", "synthetic_user")}, indent=1
        )
    )
    cache_db.close()


if __name__ == "__main__":
    asyncio.run(main())
