"""The store contract (anaphora.testing.store_contract) run against RedisConversationStore, plus the Redis-only
rules: a TTL on every key, refreshed on activity, the Redis embedding cache, and appends from separate clients.

Needs a Redis server at redis://127.0.0.1:6379/0 (`.ci/run` starts one). Each test uses its own random key prefix
and deletes only its own keys: the database is never flushed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

from anaphora.testing.embedding_cache_contract import EmbeddingCacheContract
from anaphora.testing.store_contract import ALICE, ConversationStoreContract, add_turn

pytestmark = pytest.mark.integration

redis = pytest.importorskip("redis", reason="the redis extra is not installed")

from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache  # noqa: E402
from anaphora.types import TurnTrace  # noqa: E402
from tests.integration.conftest import REDIS_URL, own_keys  # noqa: E402
from tests.unit.store.test_turn_fields import PASSAGES, budget  # noqa: E402


@pytest.fixture
async def redis_store(prefix: str) -> AsyncIterator[RedisConversationStore]:
    store = RedisConversationStore(REDIS_URL, key_prefix=prefix)
    yield store
    await store.aclose()


class TestRedisConversationStoreContract(ConversationStoreContract):
    @pytest.fixture
    async def store(self, redis_store: RedisConversationStore) -> AsyncIterator[RedisConversationStore]:
        yield redis_store


def _ttls(client, prefix: str) -> dict[bytes, int]:
    return {key: client.ttl(key) for key in own_keys(client, prefix)}


async def test_every_key_has_a_ttl(redis_store: RedisConversationStore, sync_redis, prefix: str) -> None:
    conversation = await redis_store.create(ALICE, "t")
    await add_turn(redis_store, ALICE, conversation.id, 0)
    await redis_store.save_summary(ALICE, conversation.id, 1, "s")
    await redis_store.create("bob", "other")
    ttls = _ttls(sync_redis, prefix)
    expected = {f"{prefix}{k}".encode() for k in (f"conv:{conversation.id}", f"turns:{conversation.id}")}
    expected |= {f"{prefix}sums:{conversation.id}".encode(), f"{prefix}user:{ALICE}".encode()}
    expected |= {f"{prefix}updated".encode(), f"{prefix}user:bob".encode()}
    assert expected <= set(ttls)
    assert len(ttls) == len(expected) + 1  # bob's conversation hash
    assert all(0 < ttl <= 604800 for ttl in ttls.values()), ttls


async def test_ttl_is_refreshed_on_append(prefix: str, sync_redis) -> None:
    store = RedisConversationStore(REDIS_URL, key_prefix=prefix, ttl_s=1000)
    try:
        conversation = await store.create(ALICE)
        for key in own_keys(sync_redis, prefix):
            sync_redis.expire(key, 50)  # as if time had passed
        await add_turn(store, ALICE, conversation.id, 0)
        ttls = _ttls(sync_redis, prefix)
        assert len(ttls) == 4  # conv, turns, user, updated
        assert all(900 < ttl <= 1000 for ttl in ttls.values()), ttls
    finally:
        await store.aclose()


async def test_a_vote_expires_with_its_conversation_and_does_not_extend_it(prefix: str, sync_redis) -> None:
    store = RedisConversationStore(REDIS_URL, key_prefix=prefix, ttl_s=1000)
    try:
        conversation = await store.create(ALICE)
        await add_turn(store, ALICE, conversation.id, 0)
        for key in own_keys(sync_redis, prefix):
            sync_redis.expire(key, 50)  # as if time had passed
        await store.rate(ALICE, conversation.id, 0, "up")
        ttls = _ttls(sync_redis, prefix)
        assert 0 < ttls[f"{prefix}fb:{conversation.id}".encode()] <= 50, ttls
        assert all(ttl <= 50 for ttl in ttls.values()), ttls  # the vote refreshed nothing
        await store.delete(ALICE, conversation.id)
        assert f"{prefix}fb:{conversation.id}".encode() not in set(own_keys(sync_redis, prefix))
    finally:
        await store.aclose()


async def test_expired_conversation_disappears_from_listing(prefix: str, sync_redis) -> None:
    store = RedisConversationStore(REDIS_URL, key_prefix=prefix)
    try:
        gone = await store.create(ALICE, "gone")
        kept = await store.create(ALICE, "kept")
        sync_redis.delete(f"{prefix}conv:{gone.id}")  # what the TTL does
        assert [c.id for c in await store.list(ALICE)] == [kept.id]
        assert await store.erase_user(ALICE) == {"conversations": 1, "turns": 0, "summaries": 0}
    finally:
        await store.aclose()


async def test_appends_from_separate_clients_are_gapless(prefix: str) -> None:
    """Two stores with their own connections stand in for two replicas appending to one conversation."""
    stores = [RedisConversationStore(REDIS_URL, key_prefix=prefix) for _ in range(2)]
    try:
        conversation = await stores[0].create(ALICE)
        appended = await asyncio.gather(*(add_turn(stores[n % 2], ALICE, conversation.id, n) for n in range(24)))
        assert sorted(t.index for t in appended) == list(range(24))
        turns = await stores[1].turns(ALICE, conversation.id)
        assert [t.index for t in turns] == list(range(24))
        by_index = {t.index: t.question for t in appended}
        assert [t.question for t in turns] == [by_index[i] for i in range(24)]
    finally:
        for store in stores:
            await store.aclose()


async def test_unreachable_server_is_a_store_error() -> None:
    from anaphora.errors import StoreError

    store = RedisConversationStore("redis://127.0.0.1:1/0", timeout_s=2)
    try:
        with pytest.raises(StoreError, match="cannot reach the Redis store"):
            await store.get(ALICE, "x")
    finally:
        await store.aclose()


def test_embedding_cache_round_trip_and_ttl(prefix: str, sync_redis) -> None:
    cache = RedisEmbeddingCache(REDIS_URL, key_prefix=prefix, ttl_s=1000)
    try:
        vectors = {"k1": np.arange(4, dtype=np.float32), "k2": np.ones(4, dtype=np.float64)}
        cache.put_many(vectors)
        found = cache.get_many(["k1", "missing", "k2"])
        assert set(found) == {"k1", "k2"}
        assert found["k1"].dtype == np.float32
        np.testing.assert_array_equal(found["k1"], vectors["k1"])
        np.testing.assert_array_equal(found["k2"], vectors["k2"].astype(np.float32))
        ttls = _ttls(sync_redis, prefix)
        assert set(ttls) == {f"{prefix}emb:k1".encode(), f"{prefix}emb:k2".encode()}
        assert all(0 < ttl <= 1000 for ttl in ttls.values())

        sync_redis.expire(f"{prefix}emb:k1", 10)
        cache.get_many(["k1"])  # a hit refreshes the TTL
        assert sync_redis.ttl(f"{prefix}emb:k1") > 900

        assert cache.delete_many(["k1", "missing"]) == 1
        assert set(cache.get_many(["k1", "k2"])) == {"k2"}
        assert cache.delete_many([]) == 0
    finally:
        cache.close()


def test_the_facade_runs_on_redis_history_and_cache(prefix: str, sync_redis, tmp_path) -> None:
    """Settings put history and the embedding cache in Redis, the corpus in SQLite; erasure reaches both."""
    from anaphora import Anaphora, FakeChatModel, Settings
    from anaphora.app import erase_user_data
    from tests.conftest import SAMPLE_DOCS

    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        conversation_store="redis",
        embedding_cache_store="redis",
        redis_url=REDIS_URL,
        redis_key_prefix=prefix,
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        assert isinstance(rag.components.conversations, RedisConversationStore)
        assert isinstance(rag.components.embedder.cache, RedisEmbeddingCache)
        rag.ingest([SAMPLE_DOCS])
        conversation = rag.new_conversation(user_id="facade-user")
        rag.ask("How do I install Kestrel?", conversation, user_id="facade-user")
        rag.ask("And on ARM?", conversation, user_id="facade-user")
        assert [t.index for t in rag.turns(conversation, user_id="facade-user")] == [0, 1]
        assert all(ttl > 0 for ttl in _ttls(sync_redis, prefix).values())
        counts = rag.run(erase_user_data(rag.components, "facade-user"))
        assert counts["conversations"] == 1 and counts["turns"] == 2 and counts["cached_embeddings"] >= 1
        assert not own_keys(sync_redis, f"{prefix}conv:")


def test_the_service_runs_on_the_redis_store(prefix: str, tmp_path) -> None:
    """`anaphora serve` with Redis history: /readyz checks Redis; the API uses it."""
    from tests.server_harness import serve, settings_for

    settings = settings_for(tmp_path, conversation_store="redis", redis_url=REDIS_URL, redis_key_prefix=prefix)
    with serve(settings, app_builds=True) as running:
        store = running.app.state.service.components.conversations
        assert isinstance(store, RedisConversationStore)
        with running.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["store"] == "ok"
            created = http.post("/v1/conversations", json={"title": "redis"}).json()
            assert [c["id"] for c in http.get("/v1/conversations").json()["data"]] == [created["id"]]
            assert http.delete(f"/v1/conversations/{created['id']}").status_code == 200


class TestRedisEmbeddingCacheContract(EmbeddingCacheContract):
    @pytest.fixture
    def cache(self, prefix: str) -> Iterator[RedisEmbeddingCache]:
        cache = RedisEmbeddingCache(REDIS_URL, key_prefix=prefix, ttl_s=1000)
        yield cache
        cache.close()


async def test_a_turn_written_before_the_window_fields_gets_them_from_its_trace(
    redis_store: RedisConversationStore, sync_redis, prefix: str
) -> None:
    """Redis keeps no schema version: a turn an earlier version wrote (no ``shown_passages``, no
    ``window_start``) gets them from its trace when it is read, and is left as it was."""
    conversation = await redis_store.create(ALICE)
    await add_turn(redis_store, ALICE, conversation.id, 0)
    trace = TurnTrace(question="q1?", retrieved=PASSAGES, budget=budget(1, 2))
    old = {"question": "q1?", "answer": "a", "citations": [], "trace": json.loads(trace.model_dump_json())}
    old["created_at"] = 1.0
    sync_redis.rpush(f"{prefix}turns:{conversation.id}", json.dumps(old))
    first, second = await redis_store.turns(ALICE, conversation.id)
    assert first.shown_passages == [] and first.window_start is None  # written now: its own fields, none given
    assert second.shown_passages == PASSAGES[:2] and second.window_start == 0
    assert second.trace == trace
    assert json.loads(sync_redis.lindex(f"{prefix}turns:{conversation.id}", 1)) == old
