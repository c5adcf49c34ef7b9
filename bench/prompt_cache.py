"""Prompt caching across a 20-turn conversation: the cache-stable layout with KV-state reuse against today's layout.

    python bench/prompt_cache.py [--turns 20] [--fake-only]

One scripted conversation over the sample docs (examples/docs), run in one process by three arms, turn by turn in
alternation (arm A's turn k, arm B's turn k, ..., the order reversed every other turn), each arm with its own
embedded SmolLM2 (its own llama.cpp context) and its own store:

- ``cache_stable``: the default, ``prompt_layout = "cache_stable"`` and saved KV states (``model_state_cache_mb``
  256), ``history_excerpts = "auto"``: earlier turns with their excerpts for the fake model (it stands for a model
  behind an API), without them for the embedded one;
- ``cache_stable_excerpts``: the same with ``history_excerpts = "on"`` (the same as the default for the fake model);
- ``sliding``: the layout before prompt caching (``prompt_layout = "sliding"``, the summary in the system message,
  a window sliding one turn per turn) and no saved states (``model_state_cache_mb = 0``): llama.cpp reuses only
  the live context, which the follow-up's rewrite call has just overwritten.

Answers are generated (``answer_mode = "generate"``): with the embedded model the default is ``extractive``, which
quotes passages and makes no answer call at all (a follow-up's only call is then its rewrite; that default is run
too, and reported). The summary is drained between turns (as if the user were typing), so it never competes with a
turn. Per turn: the answer call's prompt tokens, the tokens llama.cpp found in its KV cache, and the time to the
answer's first token; the share of each follow-up's answer prompt that is a byte-identical prefix of the previous
turn's answer prompt. The same script with the fake model gives that share for every arm without a model, and for
other window and context settings (``WINDOWS``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from common import ROOT, git_revision, machine, percentile, write_result

from anaphora import Settings
from anaphora.app import build_components
from anaphora.model_defaults import answer_mode
from anaphora.models import load_chat_model
from anaphora.models.base import ChatModel, ChatOptions, ChatReply, ChatStream
from anaphora.models.fake import FakeChatModel, shared_chars
from anaphora.pipeline.engine import TurnRequest
from anaphora.types import Message

DOCS = ROOT / "examples" / "docs"
QUESTIONS = [
    "How do I install Kestrel on Kubernetes?",
    "Which Helm chart version should I use?",
    "And on ARM nodes?",
    "How much memory does the agent need?",
    "What happens when it hits the limit?",
    "How do I configure the disk buffer?",
    "Where does it keep the spool?",
    "How do I upgrade it?",
    "Do I need to drain the nodes first?",
    "What about Windows?",
    "Which Windows versions are supported?",
    "How do I install it on Linux instead?",
    "Is there a systemd unit?",
    "How do I turn on TLS?",
    "Where do the certificates go?",
    "How do I rotate them?",
    "The agent does not start. What should I check?",
    "And if the logs say permission denied?",
    "How do I set the log level?",
    "What changed in the latest release?",
]
ARMS = {
    "cache_stable": {"prompt_layout": "cache_stable", "model_state_cache_mb": 256},  # excerpts: 'auto'
    "cache_stable_excerpts": {"prompt_layout": "cache_stable", "model_state_cache_mb": 256, "history_excerpts": "on"},
    "sliding": {"prompt_layout": "sliding", "model_state_cache_mb": 0, "history_turns": 8},  # as before caching
}


class Recorder:
    """A chat model that records the messages of every answer call (those that start with the system prompt)."""

    def __init__(self, model: ChatModel, system_prompt: str) -> None:
        self.model = model
        self.name = model.name
        self.capabilities = model.capabilities  # what the wrapped model declares
        self.system_prompt = system_prompt
        self.answer_prompts: list[str] = []

    def _record(self, messages: Sequence[Message]) -> None:
        if messages and messages[0].content.startswith(self.system_prompt):
            self.answer_prompts.append("\n".join(f"{m.role}: {m.content}" for m in messages))

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        self._record(messages)
        return await self.model.chat(messages, options)

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        self._record(messages)
        return self.model.stream(messages, options)

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    async def aclose(self) -> None:
        await self.model.aclose()


def prefix_shares(prompts: list[str]) -> list[float | None]:
    """Per turn: the share of its answer prompt that is a byte-identical prefix of the previous turn's."""
    shares: list[float | None] = [None]
    for previous, current in itertools.pairwise(prompts):
        shares.append(round(shared_chars(previous, current) / len(current), 4))
    return shares


def align_shares(turns: list[dict], shares: list[float | None]) -> None:
    """Give each turn that made an answer call its prompt's share (against the previous answer prompt); a turn that
    made none (it abstained) has none."""
    answered = iter(shares)
    for row in turns:
        row["prefix_share"] = next(answered) if row["answer_calls"] else None


class Arm:
    def __init__(self, name: str, settings: Settings, model: ChatModel | None) -> None:
        self.name = name
        self.settings = settings
        self.recorder = Recorder(model or load_chat_model(settings.models), settings.prompt.system_prompt)
        self.components = build_components(settings, model=self.recorder)
        self.turns: list[dict] = []

    async def start(self) -> None:
        self.components.ingestor.run([DOCS])
        self.conversation = (await self.components.conversations.create("local")).id

    async def turn(self, number: int, question: str) -> None:
        engine = self.components.engine
        started = time.perf_counter()
        stream = engine.stream(TurnRequest(question, conversation_id=self.conversation))
        first_delta = None
        async for _delta in stream:
            if first_delta is None:
                first_delta = time.perf_counter() - started
        result = await stream.result()
        wall = time.perf_counter() - started
        await engine.drain()  # the summary update, between turns
        answer = [c for c in result.trace.calls if c.purpose == "answer"]
        budget = result.trace.budget
        self.turns.append(
            {
                "turn": number,
                "answer_calls": len(answer),
                "prompt_tokens": answer[0].prompt_tokens if answer else 0,
                "cached_tokens": answer[0].cached_tokens if answer else 0,
                "first_answer_token_ms": round(answer[0].first_token_ms, 1)
                if answer and answer[0].first_token_ms is not None
                else None,
                "rewrite_cached_tokens": sum(c.cached_tokens for c in result.trace.calls if c.purpose == "rewrite"),
                "turn_s": round(wall, 3),
                "first_delta_s": round(first_delta, 3) if first_delta is not None else None,
                "turns_kept": budget.turns_kept if budget else 0,
                "turns_folded": budget.turns_folded if budget else 0,
                "summary_tokens": budget.summary if budget else 0,
                "retrieved": [p.id for p in result.trace.retrieved],
                # the answer check's verdicts: how much of the generated answer its sources support
                "units": sum(1 for v in result.trace.support if v.verdict != "filler"),
                "supported_units": sum(1 for v in result.trace.support if v.verdict == "supported"),
                "query": result.trace.query,
                "query_status": query.status if (query := result.trace.stage("query")) else None,
            }
        )

    def finish(self) -> dict:
        align_shares(self.turns, prefix_shares(self.recorder.answer_prompts))
        followups = [t for t in self.turns if t["turn"] > 1 and t["answer_calls"]]
        late = [t["prefix_share"] for t in self.turns if t["turn"] >= 9 and t.get("prefix_share") is not None]
        ttft = [t["first_answer_token_ms"] for t in followups if t["first_answer_token_ms"] is not None]
        summary_calls = self.components.engine.metrics.value("anaphora_summarizer_requests_total", status="ok")
        return {
            "turns": self.turns,
            "followups": {
                "n": len(followups),
                "reuse_share_mean": round(
                    statistics.fmean(t["cached_tokens"] / t["prompt_tokens"] for t in followups if t["prompt_tokens"]),
                    4,
                )
                if any(t["prompt_tokens"] for t in followups)
                else None,
                "prompt_tokens_mean": round(statistics.fmean(t["prompt_tokens"] for t in followups), 1)
                if followups
                else None,
                "first_answer_token_ms_p50": percentile(ttft, 50) if ttft else None,
                "first_answer_token_ms_mean": round(statistics.fmean(ttft), 1) if ttft else None,
                "turn_s_p50": percentile([t["turn_s"] for t in followups], 50) if followups else None,
                "supported_unit_share": round(
                    sum(t["supported_units"] for t in followups) / max(1, sum(t["units"] for t in followups)), 4
                ),
            },
            "prefix_share_turns_9_20_mean": round(statistics.fmean(late), 4) if late else None,
            "summary_updates": int(summary_calls),
        }

    def close(self) -> None:
        self.components.database.close()


def settings_for(data_dir: Path, chat_model: str, arm: dict, **extra) -> Settings:
    return Settings(
        data_dir=data_dir,
        chat_model=chat_model,
        answer_mode="generate",
        answer_max_tokens=96,  # the answer's length is not what is measured; shorter keeps the run short
        summary_max_tokens=96,
        rewrite_timeout_s=300,  # a contended 2-core box: the rewrite must not time out and change the query
        summary_timeout_s=600,
        **arm,
        **extra,
    )


async def run(turns: int, chat_model: str, tmp: Path, **extra) -> dict:
    arms = []
    for name, arm in ARMS.items():
        model = None
        if chat_model == "fake":
            model = FakeChatModel()
        arms.append(Arm(name, settings_for(tmp / f"{chat_model}-{name}", chat_model, arm, **extra), model))
    try:
        for arm in arms:
            await arm.start()
        for number, question in enumerate(QUESTIONS[:turns], start=1):
            order = arms if number % 2 else list(reversed(arms))  # alternate who goes first
            for arm in order:
                await arm.turn(number, question)
            if chat_model != "fake":
                print(
                    f"turn {number}: "
                    + ", ".join(
                        f"{a.name} {a.turns[-1]['cached_tokens']}/{a.turns[-1]['prompt_tokens']} cached, "
                        f"first token {a.turns[-1]['first_answer_token_ms']} ms"
                        for a in arms
                    ),
                    flush=True,
                )
        return {arm.name: arm.finish() for arm in arms}
    finally:
        for arm in arms:
            await arm.components.engine.aclose()
            arm.close()


WINDOWS = {  # verbatim window (history_turns / history_min_turns) and context window, cache-stable layout
    "8/4 turns, 8k context (the default without prompt caching)": {},
    "12/4 turns, 8k context": {"history_turns": 12},
    "16/4 turns, 8k context": {"history_turns": 16},
    "8/4 turns, 32k context": {"context_window": 32768, "history_budget_tokens": 24000},
    "16/4 turns, 32k context": {"history_turns": 16, "context_window": 32768, "history_budget_tokens": 24000},
    "16/8 turns, 8k context (the default of a model that declares prompt caching)": {
        "history_turns": 16,
        "history_min_turns": 8,
    },
    "16/8 turns, 32k context": {
        "history_turns": 16,
        "history_min_turns": 8,
        "context_window": 32768,
        "history_budget_tokens": 24000,
    },
}
EMBEDDERS = {
    "hashing": {"embedder": "hashing", "similarity_threshold": 0.0},  # the check: topic-blind retrieval
    "MiniLM": {},  # the embedded default, as the embedded run retrieves
}


async def window_sweep(turns: int, tmp: Path) -> dict:
    """The fake model's prefix shares for other window and context settings: where the folds fall decides the
    share, and the brief's 4-8 turn window folds every fifth turn."""
    rows = {}
    for embedder, retrieval in EMBEDDERS.items():
        for label, window in WINDOWS.items():
            arm = Arm(
                "cache_stable",
                settings_for(tmp / f"sweep-{len(rows)}", "fake", ARMS["cache_stable"], **retrieval, **window),
                FakeChatModel(),
            )
            try:
                await arm.start()
                for number, question in enumerate(QUESTIONS[:turns], start=1):
                    await arm.turn(number, question)
                result = arm.finish()
            finally:
                await arm.components.engine.aclose()
                arm.close()
            rows[f"{embedder}: {label}"] = {
                "prefix_share_turns_9_20_mean": result["prefix_share_turns_9_20_mean"],
                "reuse_share_mean": result["followups"]["reuse_share_mean"],
                "prompt_tokens_mean": result["followups"]["prompt_tokens_mean"],
                "folds_at_turns": [t["turn"] for t in result["turns"] if t["turns_folded"]],
            }
            print(f"{embedder}: {label}: {rows[f'{embedder}: {label}']}", flush=True)
    return rows


async def default_mode(turns: int, tmp: Path) -> dict:
    """With the embedded model's default answer mode (extractive), which model calls a follow-up makes."""
    settings = Settings(data_dir=tmp / "default", chat_model="embedded", rewrite_timeout_s=300)
    components = build_components(settings)
    try:
        components.ingestor.run([DOCS])
        conversation = (await components.conversations.create("local")).id
        purposes = []
        for question in QUESTIONS[:turns]:
            result = await components.engine.ask(TurnRequest(question, conversation_id=conversation))
            await components.engine.drain()
            purposes.append([c.purpose for c in result.trace.calls])
        mode = answer_mode(settings.answers, components.chat_model.capabilities)
        return {"answer_mode": mode, "calls_per_turn": purposes}
    finally:
        await components.engine.aclose()
        components.database.close()


async def kv_reuse(reps: int) -> dict:
    """The issue's case alone: an answer prompt, a short rewrite-like call, the next answer prompt (same system prompt
    and history, new excerpts), with saved KV states on and off, alternating; the second answer's first token."""
    from anaphora.models.llamacpp import LlamaCppChatModel, embedded_gguf_path

    models = {
        "states_on": LlamaCppChatModel(embedded_gguf_path(), context_window=4096, state_cache_bytes=256 * 2**20),
        "states_off": LlamaCppChatModel(embedded_gguf_path(), context_window=4096, state_cache_bytes=0),
    }
    docs = sorted(DOCS.glob("*.md"))
    history = []
    for i, question in enumerate(QUESTIONS[:6]):
        answer = " ".join(docs[i].read_text(encoding="utf-8").split()[:90])
        history += [Message(role="user", content=question), Message(role="assistant", content=answer)]
    system = Message(role="system", content=Settings().prompt.system_prompt)

    def answer_prompt(question: str, doc: Path) -> list[Message]:
        excerpt = " ".join(doc.read_text(encoding="utf-8").split()[:250])
        final = f"<<<CONTEXT>>>\n[{doc.name}#1]\n{excerpt}\n<<<END CONTEXT>>>\n\nQuestion: {question}"
        return [system, *history, Message(role="user", content=final)]

    rewrite = [
        Message(role="system", content="Rewrite the last message as one standalone search query."),
        Message(role="user", content="User: How do I upgrade it?\nLast message: and on Windows?\nQuery:"),
    ]
    options = ChatOptions(temperature=0.0, max_tokens=8)
    rows: dict[str, list[dict]] = {name: [] for name in models}
    for rep in range(reps):
        order = list(models.items()) if rep % 2 == 0 else list(reversed(models.items()))
        for name, model in order:
            await model.chat(answer_prompt("How much memory does the agent need?", docs[6]), options)
            await model.chat(rewrite, options)
            started = time.perf_counter()
            # a question of its own on every repetition: no second answer prompt repeats an earlier one
            stream = model.stream(answer_prompt(QUESTIONS[10 + rep], docs[7 + rep % 3]), options)
            first = None
            async for _delta in stream:
                first = first or time.perf_counter() - started
            rows[name].append(
                {
                    "prompt_tokens": stream.usage.prompt_tokens,
                    "cached_tokens": stream.usage.cached_tokens,
                    "first_token_ms": round((first or time.perf_counter() - started) * 1000, 1),
                }
            )
            print(name, rows[name][-1], flush=True)
    summary = {
        name: {
            "first_token_ms_p50": percentile([r["first_token_ms"] for r in runs], 50),
            "reuse_share_mean": round(statistics.fmean(r["cached_tokens"] / r["prompt_tokens"] for r in runs), 4),
            "prompt_tokens_mean": round(statistics.fmean(r["prompt_tokens"] for r in runs), 1),
        }
        for name, runs in rows.items()
    }
    return {"runs": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--fake-only", action="store_true", help="only the prefix shares with the fake model")
    parser.add_argument("--default-turns", type=int, default=4, help="turns run with the default answer mode")
    parser.add_argument(
        "--kv-reuse",
        type=int,
        default=0,
        metavar="REPS",
        help="only the rewrite-between-answers case, REPS times per arm (results/prompt_cache_kv.json)",
    )
    args = parser.parse_args()
    if args.kv_reuse:
        payload = {
            "command": f"python bench/prompt_cache.py --kv-reuse {args.kv_reuse}",
            "date": date.today().isoformat(),
            "revision": git_revision(),
            "machine": machine(),
            **asyncio.run(kv_reuse(args.kv_reuse)),
        }
        print(f"wrote {write_result('prompt_cache_kv', payload)}")
        return
    with tempfile.TemporaryDirectory(prefix="anaphora-prompt-cache-") as tmp:
        fake = asyncio.run(run(args.turns, "fake", Path(tmp), embedder="hashing", similarity_threshold=0.0))
        payload = {
            "command": "python bench/prompt_cache.py" + (" --fake-only" if args.fake_only else ""),
            "date": date.today().isoformat(),
            "revision": git_revision(),
            "machine": machine(),
            "turns": args.turns,
            "fake": {name: {k: v for k, v in arm.items() if k != "turns"} for name, arm in fake.items()},
            "fake_prefix_shares": {name: [t["prefix_share"] for t in arm["turns"]] for name, arm in fake.items()},
            "fake_windows": asyncio.run(window_sweep(args.turns, Path(tmp))),
        }
        if not args.fake_only:
            started = time.perf_counter()
            payload["embedded"] = asyncio.run(run(args.turns, "embedded", Path(tmp)))
            payload["embedded_s"] = round(time.perf_counter() - started, 1)
            payload["default_answer_mode"] = asyncio.run(default_mode(args.default_turns, Path(tmp)))
    path = write_result("prompt_cache", payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
