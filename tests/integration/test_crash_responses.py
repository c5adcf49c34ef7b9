"""Crash safety of Responses turns: `anaphora serve` killed with SIGKILL in the middle of ``POST /v1/responses``
turns that would open a conversation, branch a long chain or store input items, ten times, on every store.

A Responses turn writes nothing before it is answered: its new conversation, its branch's copy of the chain and the
input items it brought are stored with the turn, in one transaction. So after every kill each conversation of the
user ends with an answered turn (no conversation left empty, none ending with input items, i.e. no orphan and no
stray turn), indexes run 0..n-1, and the conversations from before the kills keep every turn they had.
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
from anaphora.store import Database, StoredTurn
from anaphora.store.protocols import ChainStart, new_conversation_id
from anaphora.testing.store_contract import make_turn
from anaphora.turn_ids import response_id
from tests.integration.services import ServiceProcess, base_settings, ingest_corpus
from tests.integration.test_crash import _backend_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORD_PAUSE_S = 0.04
CHAIN_TURNS = 300
KILLS = 10
USER = "alice"
ITEMS = [
    {"role": "user", "content": "Asked elsewhere: how do I install it?"},
    {"role": "assistant", "content": "Answered elsewhere: with the Helm chart."},
]


async def _with_store(settings: Settings, work):
    database = Database(settings.data_dir / "anaphora.db")
    closers = Closers()
    store = build_conversation_store(settings.stores, database, closers)
    try:
        return await work(store)
    finally:
        await closers.clients.aclose()
        database.close()


def seed(settings: Settings) -> tuple[str, str]:
    """A long chain and a short conversation, written before the service starts; their ids."""

    async def work(store) -> tuple[str, str]:
        chain, short = new_conversation_id(), new_conversation_id()
        await store.extend(USER, chain, [make_turn(n) for n in range(CHAIN_TURNS)], start=ChainStart(title="chain"))
        await store.extend(USER, short, [make_turn(n) for n in range(3)], start=ChainStart(title="short"))
        return chain, short

    return asyncio.run(_with_store(settings, work))


def snapshot(settings: Settings) -> dict[str, list[StoredTurn]]:
    """Every conversation of the user with all its turns, read by a fresh client as a restarted service would."""

    async def work(store) -> dict[str, list[StoredTurn]]:
        listed = await store.list(USER, limit=1000)
        return {c.id: await store.turns(USER, c.id) for c in listed}

    return asyncio.run(_with_store(settings, work))


def assert_no_partial_state(now: dict[str, list[StoredTurn]], before: dict[str, list[StoredTurn]], context: str):
    for conversation, turns in now.items():
        where = f"conversation {conversation} ({context})"
        assert turns, f"an orphan: {where} holds no turn"
        assert [t.index for t in turns] == list(range(len(turns))), f"a gap or a duplicate in {where}"
        last = turns[-1].trace
        assert last is not None and last.route_reason != "added as items" and last.stages, f"stray items: {where}"
        assert turns[: len(before.get(conversation, []))] == before.get(conversation, []), f"a turn changed: {where}"
    assert set(before) <= set(now), f"a conversation went ({context})"


def bodies(chain: str, short: str, latest: int, rng: random.Random) -> list[dict]:
    """One request of each kind: a branch of the long chain, its latest continued, a conversation, a new chain."""
    items = [*ITEMS, {"role": "user", "content": "And on ARM?"}]
    return [
        {"input": items, "previous_response_id": response_id(chain, rng.randrange(CHAIN_TURNS - 1))},
        {"input": items, "previous_response_id": response_id(chain, latest)},
        {"input": items, "conversation": short},
        {"input": items},
    ]


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_killed_responses_turns_leave_no_orphan_and_no_stray_turn(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    extra = _backend_settings(backend, request)
    data_dir = tmp_path / "data"
    ingest_corpus(data_dir)
    env = base_settings(
        data_dir,
        conversation_store=backend,
        chat_model=f"fake:{WORD_PAUSE_S}",
        turn_lock_lease_s=2,  # a killed replica's Redis lock frees itself quickly
        **extra,
    )
    settings = Settings(data_dir=data_dir, chat_model="fake", embedder="hashing", conversation_store=backend, **extra)
    chain, short = seed(settings)
    service = ServiceProcess(env, tmp_path / "service")
    seed_ = random.randrange(1 << 30)
    rng = random.Random(seed_)
    try:
        service.start()
        durations = []
        with service.client(USER) as http:
            for body in bodies(chain, short, CHAIN_TURNS - 1, rng)[:1] * 3:  # whole branches: how long a turn takes
                began = time.monotonic()
                assert http.post("/v1/responses", json=body).status_code == 200
                durations.append(time.monotonic() - began)
        turn_s = statistics.median(durations)
        before = snapshot(settings)
        kept = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            for round_ in range(KILLS):
                if round_:
                    service.start()
                latest = len(snapshot(settings)[chain]) - 1
                body = bodies(chain, short, latest, rng)[round_ % 4]

                def send(body: dict = body) -> None:
                    with service.client(USER) as http, contextlib.suppress(httpx.HTTPError):  # the server dies
                        http.post("/v1/responses", json=body)

                delay = turn_s * (0.4 if round_ < 3 else rng.uniform(0.7, 1.8))
                pool.submit(send)
                time.sleep(delay)
                service.kill()
                now = snapshot(settings)
                context = (
                    f"{backend}, kill {round_} ({list(body)}) after {delay:.2f} s, turn ~{turn_s:.2f} s, seed {seed_}"
                )
                assert_no_partial_state(now, before, context)
                kept.append(sum(map(len, now.values())) > sum(map(len, before.values())))
                before = now
        print(f"{backend}: {KILLS} kills, the turn was kept {sum(kept)} times: {kept}")
    finally:
        service.kill()
