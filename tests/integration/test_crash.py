"""Crash safety: `anaphora serve` killed with SIGKILL in the middle of a turn, on every conversation store.

The service runs a fake model that streams its answer a word at a time (``fake:SECONDS``), so a turn takes about a
second. It is killed once half-way through generating, then again and again at random moments around the end of the
turn, when the turn is being stored. After each kill the store must hold either the whole turn (question, answer,
citations, trace) or none of it, with indexes 0..n-1 and no gap, every earlier turn and the rolling summary
unchanged; and once restarted the service must take new turns on the conversation (with Redis, after the dead
process's lock lease has run out).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from anaphora.app import Closers, build_conversation_store
from anaphora.settings import Settings
from anaphora.store import Database, StoredTurn, Summary
from tests.integration.services import ServiceProcess, base_settings, ingest_corpus

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORD_PAUSE_S = 0.04
EARLIER_TURNS = 6  # past the verbatim window of 4, so there is a summary to keep intact
RANDOM_KILLS = 4
USER = "alice"


def _backend_settings(backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    if backend == "postgres":
        pytest.importorskip("psycopg", reason="the postgres extra is not installed")
        return {"postgres_url": request.getfixturevalue("new_database")()}
    if backend == "redis":
        pytest.importorskip("redis", reason="the redis extra is not installed")
        from tests.integration.conftest import REDIS_URL

        return {"redis_url": REDIS_URL, "redis_key_prefix": request.getfixturevalue("prefix")}
    return {}


def stored(settings: Settings, conversation: str) -> tuple[list[StoredTurn], Summary | None]:
    """What the store holds now, read by a fresh client as a restarted service would."""

    async def read() -> tuple[list[StoredTurn], Summary | None]:
        closers = Closers()
        database = closers.opened(Database(settings.data_dir / "anaphora.db"))
        store = build_conversation_store(settings.stores, database, closers)
        try:
            return await store.turns(USER, conversation), await store.summary(USER, conversation)
        finally:
            await closers.aclose()

    return asyncio.run(read())


def assert_whole(turns: list[StoredTurn], earlier: list[StoredTurn], asked: list[str], context: str) -> None:
    """Whole turns only, indexed 0..n-1, the earlier ones unchanged, each question asked at most once."""
    assert [t.index for t in turns] == list(range(len(turns))), f"indexes with a gap or a duplicate ({context})"
    assert turns[: len(earlier)] == earlier, f"an earlier turn changed ({context})"
    for turn in turns:
        assert turn.question and turn.answer and turn.citations, f"turn {turn.index} is incomplete ({context})"
        trace = turn.trace
        assert trace is not None and trace.question == turn.question and trace.stages, f"no trace ({context})"
    added = [t.question for t in turns[len(earlier) :]]
    assert len(set(added)) == len(added) and set(added) <= set(asked), f"{added} ({context})"


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_a_killed_turn_is_stored_whole_or_not_at_all(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    extra = _backend_settings(backend, request)
    data_dir = tmp_path / "data"
    ingest_corpus(data_dir)
    env = base_settings(
        data_dir,
        conversation_store=backend,
        chat_model=f"fake:{WORD_PAUSE_S}",
        history_turns=4,
        turn_lock_lease_s=2,  # a killed replica's Redis lock frees itself quickly
        **extra,
    )
    settings = Settings(data_dir=data_dir, chat_model="fake", embedder="hashing", conversation_store=backend, **extra)
    service = ServiceProcess(env, tmp_path / "service")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    try:
        service.start()
        with service.client(USER) as http:
            conversation = http.post("/v1/conversations").json()["id"]
            durations = []
            for n in range(EARLIER_TURNS):
                began = time.monotonic()
                reply = http.post(f"/v1/conversations/{conversation}/messages", json={"content": f"install {n}?"})
                assert reply.status_code == 200, reply.text
                durations.append(time.monotonic() - began)
        turn_s = statistics.median(durations)
        deadline = time.monotonic() + 60
        while (snapshot := stored(settings, conversation))[1] is None:  # the summary is written in the background
            assert time.monotonic() < deadline, "no rolling summary was written"
            time.sleep(0.2)
        earlier, summary = snapshot
        assert len(earlier) == EARLIER_TURNS

        delays = [turn_s * 0.4] + [turn_s * rng.uniform(0.6, 1.1) for _ in range(RANDOM_KILLS)]
        asked: list[str] = []
        kept: list[bool] = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            for round_, delay in enumerate(delays):
                if round_:
                    service.start()
                question = f"crash {round_}: how do I install Kestrel?"
                asked.append(question)

                def send(question: str = question) -> None:
                    with service.client(USER) as http, contextlib.suppress(httpx.HTTPError):  # the server dies
                        http.post(f"/v1/conversations/{conversation}/messages", json={"content": question})

                pool.submit(send)
                time.sleep(delay)
                service.kill()
                turns, after = stored(settings, conversation)
                context = f"backend {backend}, kill {round_} after {delay:.2f} s (turn ~{turn_s:.2f} s, seed {seed})"
                assert_whole(turns, earlier, asked, context)
                assert after is not None and after.text, context
                assert after.covers_turns >= summary.covers_turns, context
                kept.append(len(turns) > len(earlier) + sum(kept))

        service.start()  # the conversation still takes turns, after whatever the kills left
        with service.client(USER) as http:
            reply = http.post(f"/v1/conversations/{conversation}/messages", json={"content": "And on ARM?"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["turn_index"] == len(turns)
        final, _ = stored(settings, conversation)
        assert_whole(final, turns, ["And on ARM?"], "after the restart")  # everything from before, plus the new turn
        assert len(final) == len(turns) + 1
        print(f"{backend}: kills at {[round(d, 2) for d in delays]} s kept the turn: {kept}")
    finally:
        service.kill()
