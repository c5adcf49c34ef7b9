"""Whole conversations over real documentation trees (../shared/bench/realdocs-dev), scored by its README's rules.

    python bench/realdocs.py [--model embedded|fake|gguf:PATH] [--answer-mode generate|extractive|auto]
                             [--corpus loki,traefik,...] [--split tune|validation] [--conversation ID]
                             [--limit N] [--dump FILE]
                             [--set key=value ...] [--name realdocs] [--diagnose] [--rerun] [--personal]

Each corpus folder (without its SOURCE.md) is copied into a data dir under bench/.cache/realdocs/ keyed by the
corpus and a fingerprint of the ingest code and chunking settings, and ingested once there: a change to the parsers
or the chunker re-ingests, anything else reuses the index. Every conversation then runs turn by turn through the
product's engine with the embedded defaults (unless options say otherwise), in a fresh conversation; conversations
that share a ``user`` run in file order as that user (what they said before is remembered, and erased only before
the user's first conversation of the run), every other conversation as a user of its own. The background work of a
turn (memory, summary) is awaited before the next one, outside the turn's time. Scores are reported overall, per
corpus, per split (``tune``: choose between variants there; ``validation``: confirm only) and per kind.

Scoring follows the README's rules 1-5 (rule 6 needs a judge and is not computed): key-fact recall and the share of
turns answered, gold citation hit, wrong abstentions, correct refusals, meta length and faithfulness, plus chit-chat
turns that used neither retrieval nor a model call (from the trace), the answered share of turns that depend on a
personal fact, invented identifiers (risky tokens of the answer found in no passage the turn selected nor in the
conversation: :func:`anaphora.evaluation.metrics.unsupported_risky_tokens`), turn p50/p95 and model calls per turn,
the turns marked ``memory`` (answered, or on an isolation probe refused without another user's fact), and the
follow-ups sent to the retriever as typed (no topic carried: the searched query is the message itself).
Abstentions are detected with :data:`ABSTENTION_PATTERNS` (the product's fixed phrases come from its code).
Results: bench/results/<name>.json; ``--dump`` writes every turn (question, answer, cited sources, retrieval query,
scores) as JSON lines to read the conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import inspect
import json
import re
import shutil
import statistics
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

from common import CACHE, ROOT, git_revision, machine, percentile, summary_ms, write_result
from realdocs_loss import RecordingRetriever, diagnose, facts_indexed, loss_table, mark_unindexed, visible_text

import anaphora.ingest
from anaphora import Settings
from anaphora.app import aclose_components, answer_units_ahead, build_components, close_local, erase_user_data
from anaphora.embeddings.onnx_runtime import precision_name, resolve_precision
from anaphora.evaluation.metrics import unsupported_risky_tokens
from anaphora.models import load_chat_model
from anaphora.pipeline.answer import NOT_TOLD
from anaphora.pipeline.engine import ABSTAIN, NO_ANSWER, TurnRequest
from anaphora.store.sqlite_corpus import search_text
from anaphora.text import STOPWORDS

DATA = "realdocs-dev"
EXCLUDED = {"SOURCE.md"}
ANSWERABLE_KINDS = ("question", "followup")
CORPORA = "loki,traefik,celery,semaphore-ce,mise"
SCORED_KINDS = ("question", "followup", "meta")
# the product's fixed abstention sentences, then what any other wording of "the documents do not say" looks like
ABSTENTION_PHRASES = (ABSTAIN, NO_ANSWER, NOT_TOLD)
_DOCS = r"(?:documents?|docs|documentation|passages?|sources?|pages?)"
ABSTENTION_PATTERNS = (
    rf"\b{_DOCS}\b[^.!?\n]{{0,60}}\b(?:do|does|did)(?:n't| not)\s+(?:cover|mention|say|describe|document|include|"
    r"contain|explain|address)",
    r"\b(?:could|can)(?:n't| not)\s+find\b|\bcannot find\b|\bunable to find\b|\bfound no(?:thing)?\b",
    rf"\bnot\s+(?:covered|documented|mentioned|described|addressed)\s+(?:in|by)\s+(?:the\s+|these\s+|your\s+)?{_DOCS}",
    rf"\bno\s+(?:information|mention|passage|documentation|answer)\b[^.!?\n]{{0,40}}\b(?:in|from)\s+(?:the\s+)?{_DOCS}",
    r"\bi\s+(?:don't|do not)\s+know\b",
    # an isolation probe or a question about the user that memory cannot answer
    r"\byou\s+(?:haven't|have not|never|didn't|did not)\s+(?:told|said|mentioned|stated|given)\b",
)
_ABSTENTION = [re.compile(p, re.IGNORECASE) for p in ABSTENTION_PATTERNS]
_ALNUM = re.compile(r"[a-z0-9]+")


def _squeeze(text: str) -> str:
    return " ".join(_ALNUM.findall(text.lower()))


def data_root() -> Path:
    """The realdocs-dev folder: ``../shared/bench/`` of the repository or of the folder holding its worktree."""
    for base in (ROOT.parent, ROOT.parent.parent):
        candidate = base / "shared" / "bench" / DATA
        if candidate.is_dir():
            return candidate
    raise SystemExit(f"{DATA} not found in ../shared/bench or ../../shared/bench; pass --data")


def abstains(answer: str) -> bool:
    if any(phrase in answer for phrase in ABSTENTION_PHRASES):
        return True
    return any(p.search(answer) for p in _ABSTENTION)


def ingest_fingerprint(settings: Settings, tree: Path, *, units_ahead: bool = True) -> str:
    """What decides the index: the ingest package's code (parsers, dialects, chunker), what of a chunk is embedded
    and indexed (:func:`~anaphora.store.sqlite_corpus.search_text`), the chunking and embedder settings, whether
    the answer units were embedded with the chunks (``units_ahead``: an index built with them answers its first
    turns warm), and the corpus."""
    digest = hashlib.sha256()
    for path in sorted(Path(anaphora.ingest.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    digest.update(inspect.getsource(search_text).encode())
    # fp32 keeps the older fingerprints
    models = settings.models
    precision = resolve_precision(models.embedder_precision, models.embedder_runtime, settings.cache_dir)
    embedder = precision_name(models.embedder, precision)
    digest.update(f"{embedder}|{settings.ingest.chunk_tokens}|{settings.ingest.chunk_overlap}".encode())
    if not units_ahead:  # with the units ahead (the embedded default) the older fingerprints are kept
        digest.update(b"|no answer units ahead")
    for path in corpus_files(tree):
        digest.update(path.relative_to(tree).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def corpus_files(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*") if p.is_file() and p.name not in EXCLUDED)


def prepare_corpus(
    settings: Settings, source: Path, cache: Path, *, units_ahead: bool = True, reuse: bool = False
) -> tuple[Path, Path]:
    """(data dir, document tree): the corpus copied without SOURCE.md into a dir keyed by the ingest fingerprint.
    ``reuse`` (``--reuse-index``): the newest finished index of the corpus, whatever code built it (to compare
    answering variants while the ingest code changes elsewhere; figures to report come from a fresh index)."""
    data_dir = cache / f"{source.name}-{ingest_fingerprint(settings, source, units_ahead=units_ahead)}"
    built = sorted(cache.glob(f"{source.name}-*/ingest.json"), key=lambda p: p.stat().st_mtime)
    if reuse and built and not (data_dir / "ingest.json").exists():
        data_dir = built[-1].parent
        print(f"{source.name}: reusing the index in {data_dir.name} (--reuse-index)", flush=True)
    tree = data_dir / "docs" / source.name
    if not tree.is_dir():
        staging = data_dir / "docs" / ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        for path in corpus_files(source):
            target = staging / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        staging.rename(tree)
    return data_dir, tree


def chunk_statistics(components) -> dict:
    keys, _ = components.corpus.keys_and_texts()
    chunks = components.corpus.chunks([int(k) for k in keys]).values()
    sizes = [len(c.text) for c in chunks]
    return {
        "chunks": len(sizes),
        "chars_p10": percentile(sizes, 10),
        "chars_p50": percentile(sizes, 50),
        "chars_p90": percentile(sizes, 90),
        "chars_max": max(sizes, default=0),
        "under_150_chars": sum(1 for s in sizes if s < 150),
        "files": len({c.source for c in chunks}),
    }


def ingest(components, tree: Path, data_dir: Path) -> dict:
    """Ingest once per fingerprint, the answer units included (as the background process of ``anaphora ingest``
    embeds them: turns are then timed as a user asks once it finished); the first run's report is kept beside the
    index (its time is the cold one)."""
    marker = data_dir / "ingest.json"
    if marker.exists():
        return json.loads(marker.read_text())
    report = components.ingestor.run([tree])
    started = time.perf_counter()
    if components.answer_units is not None:  # what `anaphora ingest`'s background process does before the turns
        components.answer_units.run(None)
    stats = {
        "seconds": round(report.seconds, 1),
        "answer_units_seconds": round(time.perf_counter() - started, 1),
        "files": len(report.added) + len(report.updated),
        "skipped": report.skipped,
        **chunk_statistics(components),
    }
    marker.write_text(json.dumps(stats, indent=2))
    return stats


def hits(answer: str, must: list[list[str]]) -> list[bool]:
    lowered = answer.lower()
    return [any(alt.lower() in lowered for alt in group) for group in must]


def content_tokens(text: str) -> list[str]:
    return [t for t in _ALNUM.findall(text.lower()) if t not in STOPWORDS]


def score_turn(turn: dict, index: int, turns: list[dict], answer: str, result, earlier_answers: list[str]) -> dict:
    """The README's rules 1-5 for one turn (None: the rule does not apply to it)."""
    trace = result.trace
    ids = {p.id for p in trace.retrieved} | {c.id for c in result.citations} | {m.passage_id for m in trace.memory}
    visible = visible_text(answer, ids)
    kind, answerable, must = turn["kind"], turn["answerable"], turn["must"]
    cited = sorted({c.source for c in result.citations if c.source})
    abstained = abstains(visible)
    row: dict = {"kind": kind, "answerable": answerable, "abstained": abstained}
    if answerable and kind in SCORED_KINDS and must:
        groups = hits(visible, must)
        row["recall"] = sum(groups) / len(groups)
        row["answered"] = all(groups)
    if answerable and kind in ANSWERABLE_KINDS:
        row["gold_hit"] = bool(set(cited) & set(turn["gold_files"]))
    if answerable and kind in SCORED_KINDS:
        row["wrong_abstention"] = abstained
    if not answerable:
        leaked = [s for s in turn.get("must_not", []) if s.lower() in visible.lower()]
        row["correct_refusal"] = abstained and not leaked
        if turn.get("must_not"):
            row["leaked"] = leaked
    if "max_words" in turn:
        words = len(visible.split())
        content = content_tokens(visible)
        said = {t for text in earlier_answers for t in content_tokens(text)}
        faithful_share = sum(1 for t in content if t in said) / len(content) if content else 0.0
        row["meta_short"] = words <= turn["max_words"]
        row["meta_faithful"] = faithful_share >= 0.5
        row["meta_words"], row["meta_faithful_share"] = words, round(faithful_share, 3)
    if kind == "meta":
        row["meta_pass"] = (
            row.get("answered", True) and row.get("meta_short", True) and row.get("meta_faithful", True)
        ) and not (must and abstained)
    retrieved = any(s.name == "retrieve" for s in trace.stages)
    if kind == "chitchat":
        row["chitchat_clean"] = not retrieved and trace.model_calls == 0
    personal = {i for i, t in enumerate(turns) if t["kind"] == "personal"}
    stated = personal & set(turn.get("refers_to", [])) or turn.get("depends_on")
    if answerable and kind in SCORED_KINDS and must and stated:
        row["personal_answered"] = row["answered"]
    if turn.get("memory"):  # needs what the same user said in an earlier conversation, or an isolation probe
        row["memory_passed"] = row.get("answered", row.get("correct_refusal"))
    if kind == "followup" and retrieved:
        searched = [q for q, w in trace.query_weights.items() if w > 0] or [trace.query]
        row["followup_as_typed"] = _squeeze(" ".join(searched)) == _squeeze(turn["user"])
    if kind == "personal":  # issue 24: a statement is acknowledged, with no document quoted
        row["personal_acknowledged"] = not [c for c in result.citations if c.source != "memory"]
    conversation = [t["user"] for t in turns[: index + 1]] + earlier_answers
    shown = [f"{p.heading}\n{p.text}" for p in trace.retrieved] + [m.text for m in trace.memory]
    invented = unsupported_risky_tokens(visible, shown + conversation)
    row["invented"] = invented
    row["retrieved"], row["model_calls"], row["cited"] = retrieved, trace.model_calls, cited
    return row


def around(components, result):
    """What the extractive answerer read around the shown passages (``extractive_neighbours``): the passages
    around those of the lead's page, the page of the answer's first document citation; ``None`` when it read none."""
    extractive = components.stage_parts.extractive
    lead = next((c.source for c in result.citations if c.source != "memory"), None)
    if extractive is None or not extractive.neighbour_span or lead is None:
        return None
    return lambda shown: extractive.around(shown, lead)


async def run_conversation(
    components, conversation: dict, run: str = "first", recorder: RecordingRetriever | None = None
) -> list[dict]:
    """``run`` "again" (``--rerun``): the same user asks the conversation a second time, in a new conversation,
    with the first run remembered. A first run erases what an earlier run left of its user (a cached data dir is
    reused across runs), so nothing is remembered from before. ``recorder`` (``--diagnose``): the retriever's
    candidates are kept, and each answerable turn gets its loss stage (:mod:`realdocs_loss`)."""
    engine = components.engine
    user = f"realdocs-{conversation.get('user') or conversation['id']}"
    if run == "first" and conversation.get("first_of_user", True):
        await erase_user_data(components, user)
    created = await components.conversations.create(user, conversation["id"])
    rows, answers = [], []
    for index, turn in enumerate(conversation["turns"]):
        if recorder is not None:
            recorder.reset()
        started = time.perf_counter()
        result = await engine.ask(TurnRequest(turn["user"], user_id=user, conversation_id=created.id))
        ms = (time.perf_counter() - started) * 1000
        await engine.drain()  # the turn's memory and summary work, before the next turn (outside its time)
        row = score_turn(turn, index, conversation["turns"], result.answer, result, answers)
        if recorder is not None and "gold_hit" in row:
            deep = await recorder.deep()
            row |= diagnose(
                turn, result.trace.retrieved, recorder.last, deep, row.get("recall", 0.0), around(components, result)
            )
            row["queries"] = recorder.last_queries
        row.update(
            conversation=conversation["id"],
            corpus=conversation["corpus"],
            split=conversation.get("split", "tune"),
            turn=index,
            ms=round(ms, 1),
            stage_ms=result.trace.timings_ms,
            user=turn["user"],
            answer=result.answer,
            query=result.trace.query,
            route=result.trace.route,
            answer_source=result.trace.answer_source,
            gold_files=turn["gold_files"],
            must=turn["must"],
            run=run,
        )
        rows.append(row)
        answers.append(result.answer)
        print(
            f"  {conversation['id']} turn {index} {turn['kind']:9} {ms / 1000:5.1f}s "
            f"recall {row.get('recall', '-')} gold {row.get('gold_hit', '-')} abstained {row['abstained']}",
            flush=True,
        )
    return rows


def same_answers(first: list[dict], again: list[dict]) -> dict:
    """How many re-run turns got the first run's answer word for word (memory ids aside, they are new each run):
    remembering the first run should change nothing a second asking of the same questions reads."""
    before = {(r["conversation"], r["turn"]): _MEMORY_ID.sub("[memory]", r["answer"]) for r in first}
    equal = [before.get((r["conversation"], r["turn"])) == _MEMORY_ID.sub("[memory]", r["answer"]) for r in again]
    return {"hits": sum(equal), "n": len(equal)}


_MEMORY_ID = re.compile(r"\[memory:[0-9a-f]+\]")


def depends_on_personal(conversation: dict) -> bool:
    """Whether a turn of the conversation refers to a personal turn (a fact the user stated)."""
    turns = conversation["turns"]
    personal = {i for i, t in enumerate(turns) if t["kind"] == "personal"}
    return any(personal & set(t.get("refers_to", [])) for t in turns)


def share(rows: list[dict], key: str) -> dict:
    values = [r[key] for r in rows if r.get(key) is not None]
    mean = round(statistics.fmean(float(v) for v in values), 4) if values else None
    return {"value": mean, "hits": sum(1 for v in values if v is True), "n": len(values)}


def aggregate(rows: list[dict]) -> dict:
    keys = (
        "recall",
        "answered",
        "gold_hit",
        "wrong_abstention",
        "correct_refusal",
        "meta_pass",
        "meta_short",
        "meta_faithful",
        "chitchat_clean",
        "personal_answered",
        "personal_acknowledged",
        "memory_passed",
        "followup_as_typed",
    )
    summary = {key: share(rows, key) for key in keys}
    summary["turns"] = len(rows)
    summary["invented_turns"] = sum(1 for r in rows if r["invented"])
    summary["invented_tokens"] = sorted({t for r in rows for t in r["invented"]})
    summary["turn_ms"] = summary_ms([r["ms"] for r in rows])
    summary["model_calls_per_turn"] = round(statistics.fmean(r["model_calls"] for r in rows), 3) if rows else None
    return summary


def breakdown(rows: list[dict]) -> dict:
    by: dict[str, dict] = {"overall": aggregate(rows)}
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[f"corpus:{row['corpus']}"].append(row)
        groups[f"split:{row['split']}"].append(row)
        groups[f"kind:{row['kind']}"].append(row)
    by.update({name: aggregate(group) for name, group in sorted(groups.items())})
    return by


TABLE_KEYS = (
    "answered",
    "recall",
    "gold_hit",
    "meta_pass",
    "correct_refusal",
    "wrong_abstention",
    "personal_answered",
    "memory_passed",
    "followup_as_typed",
)


def print_table(scores: dict) -> None:
    """One line per split, corpus and kind: the figures the issue's targets name, as value (hits/n)."""
    print(f"\n  {'':22}" + "".join(f"{k[:13]:>16}" for k in TABLE_KEYS) + f"{'p50/p95 ms':>14}")
    for name, block in scores.items():
        if name.startswith(("split:", "corpus:", "overall", "kind:")):
            cells = []
            for key in TABLE_KEYS:
                cell = block[key]
                value = "-" if cell["value"] is None else f"{cell['value']:.2f}"
                cells.append(f"{value} ({cell['hits']}/{cell['n']})" if cell["n"] else "-")
            ms = block["turn_ms"]
            print(f"  {name:22}" + "".join(f"{c:>16}" for c in cells) + f"{ms['p50']:>7}/{ms['p95']}")


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set wants key=value, got {pair!r}")
        overrides[key.strip()] = value.strip()
    return overrides


async def run_corpus(name: str, conversations: list[dict], args, data: Path, rows: list[dict], done) -> dict:
    """Ingest (once) and run the corpus's conversations, appending each turn's row to ``rows`` and calling
    ``done(stats)`` after each conversation (the results so far are saved: a run that dies keeps them)."""
    overrides = parse_overrides(args.set)
    base = Settings(chat_model=args.model, answer_mode=args.answer_mode, **overrides)
    model = load_chat_model(base.models)  # not loaded yet: its declared capabilities decide the answer mode
    units_ahead = answer_units_ahead(base, model) is not None
    data_dir, tree = prepare_corpus(
        base, data / name, CACHE / "realdocs", units_ahead=units_ahead, reuse=args.reuse_index
    )
    settings = base.model_copy(update={"data_dir": data_dir})
    components = build_components(settings, model=model)
    try:
        stats = ingest(components, tree, data_dir)
        print(f"{name}: {stats['chunks']} chunks from {stats['files']} files (ingest {stats['seconds']} s)", flush=True)
        recorder = RecordingRetriever(components.retriever) if args.diagnose else None
        indexed = facts_indexed(components, conversations) if args.diagnose else {}
        for conversation in conversations:
            found = await run_conversation(components, conversation, recorder=recorder)
            mark_unindexed(found, indexed)
            rows.extend(found)
            done(stats)
        if args.rerun:  # issue 24: each conversation once more, by the same user, with memory of the first run
            for conversation in conversations:
                rows.extend(await run_conversation(components, conversation, "again"))
                done(stats)
    finally:
        await aclose_components(components)
        close_local(components)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help=f"the {DATA} folder (default: ../shared/bench/)")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--answer-mode", default=None, choices=("generate", "extractive", "auto"))
    parser.add_argument("--corpus", default=CORPORA)
    parser.add_argument("--split", default=None, choices=("tune", "validation"), help="only this split's corpora")
    parser.add_argument("--conversation", default=None, help="only this conversation id (or these, comma-separated)")
    parser.add_argument("--limit", type=int, default=None, help="conversations per corpus")
    parser.add_argument("--set", action="append", default=[], help="a settings override, key=value (repeatable)")
    parser.add_argument("--dump", type=Path, default=None, help="write every turn as JSON lines")
    parser.add_argument("--name", default="realdocs", help="results file name (bench/results/NAME.json)")
    parser.add_argument("--rerun", action="store_true", help="run each conversation a second time (memory on)")
    parser.add_argument(
        "--reuse-index", action="store_true", help="the newest index of each corpus, whatever ingest code built it"
    )
    parser.add_argument("--diagnose", action="store_true", help="where each answerable turn loses its gold chunk")
    parser.add_argument(
        "--personal", action="store_true", help="only the conversations with turns that depend on a personal fact"
    )
    args = parser.parse_args()
    data = args.data or data_root()
    conversations = [json.loads(line) for line in (data / "conversations.jsonl").read_text().splitlines() if line]
    if args.conversation:  # one id, or several separated by commas (issue 24)
        wanted = args.conversation.split(",")
        conversations = [c for c in conversations if c["id"] in wanted]
        if not conversations:
            raise SystemExit(f"no conversation {args.conversation!r}")
    if args.split:
        conversations = [c for c in conversations if c.get("split", "tune") == args.split]
    seen_users: set[str] = set()
    for conversation in conversations:  # a shared user's memory is erased before their first conversation only
        user = conversation.get("user")
        conversation["first_of_user"] = user not in seen_users
        seen_users.add(user or conversation["id"])
    if args.personal:  # issue 24: the turns that depend on a stated fact, without the rest of the corpus's runs
        conversations = [c for c in conversations if depends_on_personal(c)]
    started = time.time()
    rows: list[dict] = []
    ingest_stats = {}
    options = " ".join(
        [f"--model {args.model}"]
        + ([f"--answer-mode {args.answer_mode}"] if args.answer_mode else [])
        + ([f"--corpus {args.corpus}"] if args.corpus != CORPORA else [])
        + ([f"--split {args.split}"] if args.split else [])
        + ([f"--conversation {args.conversation}"] if args.conversation else [])
        + ([f"--limit {args.limit}"] if args.limit else [])
        + [f"--set {s}" for s in args.set]
        + (["--rerun"] if args.rerun else [])
        + (["--personal"] if args.personal else [])
    )

    def save() -> tuple[dict, Path]:
        """Results so far: written after each conversation, so a run that is stopped keeps what it measured."""
        first = [r for r in rows if r["run"] == "first"]
        again = [r for r in rows if r["run"] == "again"]
        payload = {
            "date": date.today().isoformat(),
            "machine": machine(),
            "revision": git_revision(),
            "command": f"python bench/realdocs.py {options}",
            "seconds": round(time.time() - started),
            "conversations": len({r["conversation"] for r in first}),
            "corpora_done": list(ingest_stats),
            "abstention_phrases": list(ABSTENTION_PHRASES),
            "abstention_patterns": list(ABSTENTION_PATTERNS),
            "ingest": ingest_stats,
            "scores": breakdown(first),
            **({"loss": loss_table(first)} if args.diagnose else {}),
            **(
                {"rerun": {"first": aggregate(first), "again": aggregate(again), "same": same_answers(first, again)}}
                if again
                else {}
            ),
        }
        if args.dump:
            lines = "".join(json.dumps(row) + "\n" for row in rows).encode()
            args.dump.write_bytes(gzip.compress(lines) if args.dump.suffix == ".gz" else lines)
        return payload, write_result(args.name, payload)

    for corpus in args.corpus.split(","):
        chosen = [c for c in conversations if c["corpus"] == corpus][: args.limit]
        if chosen:

            def done(stats: dict, corpus: str = corpus) -> None:
                ingest_stats[corpus] = stats
                save()

            asyncio.run(run_corpus(corpus, chosen, args, data, rows, done))
    payload, path = save()
    overall = payload["scores"]["overall"]
    print(f"\n{len(rows)} turns in {payload['conversations']} conversations, {payload['seconds']} s")
    for key in ("recall", "answered", "gold_hit", "wrong_abstention", "correct_refusal", "meta_pass"):
        print(f"  {key:18} {overall[key]['value']}  ({overall[key]['hits']}/{overall[key]['n']})")
    for key in ("chitchat_clean", "personal_answered", "personal_acknowledged", "meta_short", "meta_faithful"):
        print(f"  {key:18} {overall[key]['hits']}/{overall[key]['n']}")
    for key in ("memory_passed", "followup_as_typed"):
        print(f"  {key:18} {overall[key]['hits']}/{overall[key]['n']}")
    print_table(payload["scores"])
    if "rerun" in payload:
        first, second = payload["rerun"]["first"]["answered"], payload["rerun"]["again"]["answered"]
        print(f"  re-run answered    {second['value']} (first run {first['value']})")
        same = payload["rerun"]["same"]
        print(f"  re-run answers equal to the first run's: {same['hits']}/{same['n']}")
    print(f"  invented identifiers: {overall['invented_turns']} turns {overall['invented_tokens'][:10]}")
    print(f"  turn ms p50 {overall['turn_ms']['p50']} p95 {overall['turn_ms']['p95']}")
    print(f"  model calls per turn {overall['model_calls_per_turn']}")
    if "loss" in payload:
        for name, counts in payload["loss"].items():
            print(f"  loss {name:18} {counts}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
