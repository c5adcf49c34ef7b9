"""The memory-store contract (anaphora.testing.memory_contract) run against PostgresMemoryStore on a real
PostgreSQL with pgvector (the `postgres_url` / `new_database` fixtures in conftest.py), and what is PostgreSQL's
own: recorded migrations, the vector dimension and text search configuration fixed per database, NUL characters,
every query filtered by user in its SQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from anaphora.errors import ConfigurationError, StoreError
from anaphora.testing.memory_contract import ALICE, BOB, EMBEDDER, MemoryStoreContract, add_texts, episode, fact

pytestmark = pytest.mark.integration

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")

from anaphora.memory.postgres_store import MIGRATIONS, TABLES, PostgresMemoryStore  # noqa: E402


async def count_rows(store: PostgresMemoryStore, user_id: str) -> dict[str, int]:
    counts = {}
    async with store.pool.connection() as conn:
        for table in TABLES:
            row = await (
                await conn.execute(f"SELECT count(*) AS n FROM {table} WHERE user_id = %s", (user_id,))
            ).fetchone()
            counts[table] = row["n"]
    return counts


class TestPostgresMemoryStoreContract(MemoryStoreContract):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresMemoryStore]:
        store = PostgresMemoryStore(postgres_url, max_size=4)
        await store.open()
        async with store.pool.connection() as conn:
            await conn.execute(f"TRUNCATE {', '.join(TABLES)}, memory_epochs")
        yield store
        await store.aclose()

    async def rows_of(self, store: PostgresMemoryStore, user_id: str) -> dict[str, int]:
        return await count_rows(store, user_id)


@pytest.fixture
async def fresh(new_database) -> AsyncIterator[PostgresMemoryStore]:
    store = PostgresMemoryStore(new_database(), max_size=4)
    yield store
    await store.aclose()


async def test_migrations_are_recorded_and_run_once(new_database) -> None:
    url = new_database()
    first, second = PostgresMemoryStore(url), PostgresMemoryStore(url)
    try:
        await asyncio.gather(first.open(), second.open())  # two replicas starting together
        async with first.pool.connection() as conn:
            rows = await (await conn.execute("SELECT version, name FROM memory_migrations ORDER BY version")).fetchall()
        assert [(r["version"], r["name"]) for r in rows] == [(n, name) for n, (name, _) in enumerate(MIGRATIONS, 1)]
    finally:
        await first.aclose()
        await second.aclose()


async def test_the_vector_dimension_is_fixed_by_the_first_vectors(fresh) -> None:
    assert await fresh.dense(ALICE, EMBEDDER.embed(["anything"]), 5) == [[]]  # nothing stored yet: no dimension
    await add_texts(fresh, ALICE, ["Alice: I run k3s"])
    with pytest.raises(ConfigurationError, match="embedder changed"):
        await fresh.add(BOB, [episode(BOB, "Bob: a note")], np.ones((1, 8), dtype=np.float32) / np.sqrt(8))
    assert (await fresh.list(BOB)).items == ()  # the refused add stored nothing, not even the item


async def test_another_text_search_configuration_is_refused(new_database) -> None:
    url = new_database()
    english = PostgresMemoryStore(url)
    await english.open()
    await english.aclose()
    simple = PostgresMemoryStore(url, text_search_config="simple")
    with pytest.raises(ConfigurationError, match="text search configuration"):
        await simple.open()
    await simple.aclose()


async def test_nul_characters_are_stored_as_replacement_characters(fresh) -> None:
    item = episode(ALICE, "Alice: zeppelin\x00 harbour")
    await fresh.add(ALICE, [item], EMBEDDER.embed([item.text]))
    (stored,) = (await fresh.get_many(ALICE, [item.id])).values()
    assert stored.text == "Alice: zeppelin\ufffd harbour"
    assert [h.item_id for h in (await fresh.lexical(ALICE, ["zeppelin\x00"], 5))[0]] == [item.id]


async def test_concurrent_adds_of_one_fact_store_it_once(fresh) -> None:
    """Two replicas remembering the same fact at once: the per-user lock makes the second find the first."""
    others = [PostgresMemoryStore(fresh.pool.conninfo, max_size=2) for _ in range(3)]
    try:
        stored = await asyncio.gather(
            *(
                store.add(ALICE, [fact(ALICE, "uses", "k3s", time=1000.0 + n)])
                for n, store in enumerate([fresh, *others])
            )
        )
    finally:
        for store in others:
            await store.aclose()
    assert sum(len(s) for s in stored) == 1
    assert len((await fresh.list(ALICE, kind="fact")).items) == 1


async def test_every_query_names_the_user(fresh) -> None:
    """Each statement that reads or changes a user's rows filters by user_id in its SQL; only the TTL sweep, which
    covers every user, does not."""
    import anaphora.memory.postgres_store as module

    statements = []
    real_execute = psycopg.AsyncConnection.execute

    async def recording(conn, query, params=None, **kwargs):
        statements.append(query if isinstance(query, str) else query.as_string(conn))
        return await real_execute(conn, query, params, **kwargs)

    await fresh.open()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.AsyncConnection, "execute", recording)
        ids = await add_texts(fresh, ALICE, ["Alice: I run k3s on a Pi"])
        await fresh.add(ALICE, [fact(ALICE, "uses", "k3s")])
        await fresh.lexical(ALICE, ["k3s"], 5)
        await fresh.dense(ALICE, EMBEDDER.embed(["k3s"]), 5)
        await fresh.get_many(ALICE, ids)
        await fresh.list(ALICE, kind="fact")
        await fresh.entities(ALICE)
        await fresh.profile(ALICE)
        await fresh.export(ALICE)
        await fresh.delete(ALICE, ids[0])
        await fresh.erase_user(ALICE)
    touching = [s for s in statements if any(table in s for table in module.TABLES)]
    assert touching and all("user_id" in s for s in touching), [s for s in touching if "user_id" not in s]


async def test_unreachable_server_is_a_store_error(tmp_path: Path) -> None:
    store = PostgresMemoryStore(f"postgresql://nobody@/nodb?host={tmp_path}", timeout_s=2)
    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL memory store"):
        await store.list(ALICE)
    await store.aclose()


def test_the_service_remembers_in_postgres_and_erase_leaves_no_row(new_database, tmp_path: Path) -> None:
    """memory_store 'auto' follows conversation_store 'postgres'; turns are remembered there, GET /v1/memories reads
    them, and the right to erase removes every memory row of the user (counted in SQL) and none of another's."""
    from tests.server_harness import serve, settings_for
    from tests.unit.server.test_history import wait_for

    url = new_database()
    settings = settings_for(tmp_path, conversation_store="postgres", postgres_url=url)

    def rows(user: str) -> dict[str, int]:
        with psycopg.connect(url) as conn:
            return {
                t: conn.execute(f"SELECT count(*) FROM {t} WHERE user_id = %s", (user,)).fetchone()[0] for t in TABLES
            }

    conversations = {}
    with serve(settings, app_builds=True) as running:
        assert isinstance(running.components.memory, PostgresMemoryStore)
        for user in ("alice", "bob"):
            with running.client(user) as http:
                conversations[user] = http.post("/v1/conversations").json()["id"]
                http.post(
                    f"/v1/conversations/{conversations[user]}/messages",
                    json={"content": "My chart version is 2.7.1, how do I install Kestrel on Kubernetes?"},
                ).raise_for_status()
        wait_for(lambda: rows("alice")["memory_items"] >= 2 and rows("bob")["memory_items"] >= 2)
        with running.client("alice") as alice:
            listed = alice.get("/v1/memories").json()["data"]
            assert {m["provenance"]["conversation_id"] for m in listed} == {conversations["alice"]}
            assert any(m["kind"] == "fact" and m["value"] == "2.7.1" for m in listed)
            before = rows("alice")
            erased = alice.delete("/v1/users/alice/data").json()
        assert erased["memories"] == before["memory_items"] and erased["memory_vectors"] == before["memory_vectors"]
        assert erased["entities"] == before["memory_entities"] and erased["conversations"] == 1
        assert all(n == 0 for n in rows("alice").values())
        assert rows("bob")["memory_items"] >= 2


@pytest.mark.parametrize("erase", ["/v1/users/alice/data", "/v1/memories"])
def test_erase_wins_over_the_background_write_on_postgres(new_database, tmp_path: Path, erase: str) -> None:
    """The back-to-back race of tests/unit/memory/test_erase_wins.py with the memory in PostgreSQL: the epoch is
    checked under the user's advisory lock inside the write's transaction, so it holds across replicas."""
    from tests.server_harness import components_for, settings_for
    from tests.unit.memory.test_erase_wins import race, slowed

    url = new_database()
    settings = settings_for(tmp_path, conversation_store="postgres", postgres_url=url)

    def rows(user: str) -> int:
        with psycopg.connect(url) as conn:
            return sum(
                conn.execute(f"SELECT count(*) FROM {t} WHERE user_id = %s", (user,)).fetchone()[0] for t in TABLES
            )

    race(settings, slowed(components_for(settings, ingest=False)), erase, rows)


async def test_old_episodes_keep_only_the_users_words(new_database) -> None:
    """Episodes from before issue 24 ("question\\nanswer") keep the user's words when the store is opened again
    with the step not yet applied; the answer's words are no longer found."""
    url = new_database()
    store = PostgresMemoryStore(url, max_size=2)
    old = [
        episode(ALICE, "how do I turn on retention?\nSet retention_period in the compactor block."),
        episode(ALICE, "what is new in 3.0?"),
    ]
    await store.add(ALICE, old)
    assert (await store.lexical(ALICE, ["compactor"], 5))[0]
    async with store.pool.connection() as conn:
        await conn.execute("DELETE FROM memory_migrations WHERE name = 'm003_episodes_keep_the_users_words'")
    await store.aclose()
    store = PostgresMemoryStore(url, max_size=2)
    try:
        texts = sorted(i.text for i in (await store.get_many(ALICE, [e.id for e in old])).values())
        assert texts == ["how do I turn on retention?", "what is new in 3.0?"]
        assert (await store.lexical(ALICE, ["compactor"], 5))[0] == []
        assert (await store.lexical(ALICE, ["retention"], 5))[0]
    finally:
        await store.aclose()
