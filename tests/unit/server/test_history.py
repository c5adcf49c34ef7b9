"""The history TTL (store.delete_inactive and the lifespan's sweeper) and the atomic erase (store.erase_user).
Time is faked: nothing sleeps for the TTL."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

import anaphora.store.sqlite_conversations as conversations_module
from anaphora.server.history_sweeper import HistorySweeper
from anaphora.server.turns import TurnRunner
from anaphora.store import Database, NewTurn, SQLiteConversationStore
from anaphora.types import TurnTrace
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock(time.time())
    monkeypatch.setattr(conversations_module, "time", SimpleNamespace(time=fake))  # the store's timestamps
    return fake


@pytest.fixture
def store(tmp_path):
    database = Database(tmp_path / "anaphora.db")
    yield SQLiteConversationStore(database)
    database.close()


async def conversation_with(store, clock, user: str, at: float, turns: int = 1, summary: bool = False) -> str:
    clock.now = at
    conversation = await store.create(user)
    for _ in range(turns):
        await store.append_turn(user, conversation.id, NewTurn(question="q", answer="a", trace=TurnTrace(question="q")))
    if summary:
        await store.save_summary(user, conversation.id, 1, "summary")
    return conversation.id


async def test_delete_inactive_counts_what_went_and_spares_the_rest(store, clock) -> None:
    old = await conversation_with(store, clock, "alice", 1000, turns=2, summary=True)
    spared = await conversation_with(store, clock, "bob", 1000)
    recent = await conversation_with(store, clock, "alice", 5000)
    revived = await conversation_with(store, clock, "bob", 1000)
    clock.now = 6000
    await store.append_turn("bob", revived, NewTurn(question="q", answer="a"))  # activity moves updated_at

    assert await store.delete_inactive(2000, keep=[spared]) == {"conversations": 1, "turns": 2, "summaries": 1}
    assert [c.id for c in await store.list("alice")] == [recent] and old != recent
    assert {c.id for c in await store.list("bob")} == {spared, revived}
    assert store.db.query("SELECT COUNT(*) FROM summaries")[0][0] == 0
    assert await store.delete_inactive(2000) == {"conversations": 1, "turns": 1, "summaries": 0}
    assert await store.delete_inactive(2000) == {"conversations": 0, "turns": 0, "summaries": 0}


async def test_erase_user_is_one_transaction_with_counts(store, clock) -> None:
    await conversation_with(store, clock, "alice", 1000, turns=2, summary=True)
    await conversation_with(store, clock, "alice", 1000, turns=0)
    kept = await conversation_with(store, clock, "bob", 1000, summary=True)
    assert await store.erase_user("alice") == {"conversations": 2, "turns": 2, "summaries": 1}
    assert await store.list("alice") == [] and [c.id for c in await store.list("bob")] == [kept]
    assert store.db.query("SELECT COUNT(*) FROM summaries")[0][0] == 1


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_the_sweeper_deletes_inactive_conversations(tmp_path, clock) -> None:
    settings = settings_for(tmp_path, history_ttl_s=100, history_sweep_interval_s=0.02)
    with serve(settings, components_for(settings)) as running, running.client("alice") as http:
        sweeper = running.app.state.service.sweeper
        sweeper.clock = clock
        old = http.post("/v1/conversations").json()["id"]
        http.post(f"/v1/conversations/{old}/messages", json={"content": QUESTION}).raise_for_status()
        clock.now += 50
        fresh = http.post("/v1/conversations").json()["id"]
        clock.now += 60  # old: 110 s idle, fresh: 60 s
        wait_for(lambda: http.get(f"/v1/conversations/{old}").status_code == 404)
        assert [c["id"] for c in http.get("/v1/conversations").json()["data"]] == [fresh]
        assert sweeper.deleted["conversations"] == 1 and sweeper.deleted["turns"] == 1
        clock.now += 41
        wait_for(lambda: http.get("/v1/conversations").json()["data"] == [])
    assert not sweeper.running and not hasattr(running.app.state, "service")  # stopped with the app


def test_a_zero_ttl_keeps_history_forever(tmp_path) -> None:
    settings = settings_for(tmp_path, history_ttl_s=0)
    with serve(settings, components_for(settings, ingest=False)) as running:
        assert running.app.state.service.sweeper is None


async def test_a_conversation_with_a_turn_in_flight_is_spared(tmp_path, clock) -> None:
    settings = settings_for(tmp_path)
    components = components_for(settings, ingest=False)
    try:
        runner = TurnRunner(components.engine, max_per_user=4)
        store = components.conversations
        busy = await conversation_with(store, clock, "alice", 1000)
        idle = await conversation_with(store, clock, "alice", 1000)
        sweeper = HistorySweeper(store, runner, ttl_s=10, interval_s=60, clock=lambda: 5000)
        async with runner.conversation("alice", busy):
            assert await sweeper.sweep() == {"conversations": 1, "turns": 1, "summaries": 0}
        assert [c.id for c in await store.list("alice")] == [busy]
        assert idle not in runner.busy_conversations()
    finally:
        components.database.close()


def test_the_memory_sweeper_deletes_memories_past_their_ttl(tmp_path, fake_model) -> None:
    """memory_ttl_days: the service sweeps items from turns older than the TTL (every user's), keeps the rest."""
    from anaphora.memory.types import EntityMention
    from anaphora.testing.memory_contract import EMBEDDER, episode

    settings = settings_for(tmp_path, memory_ttl_days=1, history_sweep_interval_s=0.02)
    now = time.time()
    old = [episode(user, f"{user}: an old note", time=now - 3 * 86400) for user in ("alice", "bob")]
    young = episode("alice", "alice: a recent note", time=now - 3600)
    components = components_for(settings, fake_model, ingest=False)
    memory = components.memory

    async def write():
        for item in [*old, young]:
            await memory.add(item.user_id, [item], EMBEDDER.embed([item.text]))
        await memory.upsert_entities("alice", [EntityMention("Zeppelin", "product", now - 2 * 86400)])

    asyncio.run(write())
    with serve(settings, components) as running, running.client("alice") as http:
        sweeper = running.app.state.service.memory_sweeper
        wait_for(lambda: sweeper.deleted["memories"] == 2)
        assert sweeper.deleted == {"memories": 2, "vectors": 2, "entities": 1, "profiles": 0}
        assert [m["id"] for m in http.get("/v1/memories").json()["data"]] == [young.id]
    assert not sweeper.running and not hasattr(running.app.state, "service")  # stopped with the app


def test_memories_are_kept_forever_without_a_ttl(tmp_path) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, ingest=False)) as running:
        assert settings.memory.memory_ttl_days is None and running.app.state.service.memory_sweeper is None
