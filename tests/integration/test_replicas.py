"""Two `anaphora serve` processes sharing PostgreSQL (history, summaries, turn locks) and Redis (sessions) behave as
one service: a conversation continued alternately across them, concurrent turns of one conversation sent to both,
other users' turns meanwhile, the rolling summary, and sessions with their inactivity TTL."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.services import ServiceProcess, base_settings, ingest_corpus

pytestmark = [pytest.mark.integration, pytest.mark.slow]

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytest.importorskip("redis", reason="the redis extra is not installed")

from tests.integration.conftest import REDIS_URL  # noqa: E402

HISTORY_TURNS = 4  # a small verbatim window, so summaries happen
SESSION_TTL_S = 8.0
ALTERNATING_TURNS = 10
QUESTIONS = [
    "How do I install Kestrel on Kubernetes?",
    "And on ARM?",
    "Which versions are supported?",
    "How do I upgrade it?",
    "What about configuration?",
]
SESSION = "X-Anaphora-Session"


@pytest.fixture
def replicas(tmp_path: Path, new_database, prefix: str) -> Iterator[list[ServiceProcess]]:
    url = new_database()
    started: list[ServiceProcess] = []
    try:
        for name in ("a", "b"):
            data_dir = tmp_path / name / "data"
            ingest_corpus(data_dir)
            env = base_settings(
                data_dir,
                conversation_store="postgres",
                postgres_url=url,
                session_store="redis",
                redis_url=REDIS_URL,
                redis_key_prefix=prefix,
                turn_lock="auto",  # PostgreSQL advisory locks, following the conversation store
                history_turns=HISTORY_TURNS,
                session_ttl_s=SESSION_TTL_S,
                max_concurrent_turns_per_user=8,
            )
            started.append(ServiceProcess(env, tmp_path / name, name=f"replica-{name}").start())
        yield started
    finally:
        for service in started:
            service.stop()
    for service in started:  # clean shutdowns, no errors logged
        assert '"level": "ERROR"' not in service.log_tail(100_000), service.log_tail()


async def ask(http: httpx.AsyncClient, conversation: str, question: str) -> httpx.Response:
    response = await http.post(f"/v1/conversations/{conversation}/messages", json={"content": question})
    assert response.status_code == 200, response.text
    return response


def history_seen(turn: dict) -> int:
    """How many earlier turns the turn's prompt was given (capped by the verbatim window)."""
    return turn["trace"]["budget"]["turns_available"]


async def summary_covers(url: str, conversation: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT COALESCE(MAX(covers_turns), 0) FROM summaries WHERE conversation_id = %s", (conversation,)
        )
        return (await cursor.fetchone())[0]


async def background_user(replicas: list[ServiceProcess], user: str, stop: asyncio.Event) -> int:
    """Another user's conversation, alternating replicas, until told to stop; returns how many turns it made."""
    clients = [r.async_client(user) for r in replicas]
    try:
        conversation = (await clients[0].post("/v1/conversations")).json()["id"]
        n = 0
        while not stop.is_set():
            body = (await ask(clients[n % 2], conversation, QUESTIONS[n % len(QUESTIONS)])).json()
            assert body["turn_index"] == n
            n += 1
        turns = (await clients[1].get(f"/v1/conversations/{conversation}")).json()["turns"]
        assert [t["index"] for t in turns] == list(range(n))
        return n
    finally:
        for client in clients:
            await client.aclose()


async def test_two_replicas_serve_one_conversation(replicas: list[ServiceProcess]) -> None:
    a, b = replicas
    postgres_url = a.env["ANAPHORA_POSTGRES_URL"]
    stop = asyncio.Event()
    others = [asyncio.create_task(background_user(replicas, user, stop)) for user in ("bob", "carol")]
    http = [a.async_client("alice"), b.async_client("alice")]
    try:
        # one conversation, continued alternately: A, B, A, B, ...
        conversation = (await http[0].post("/v1/conversations", json={"title": "replicas"})).json()["id"]
        sessions = set()
        for n in range(ALTERNATING_TURNS):
            response = await ask(http[n % 2], conversation, QUESTIONS[n % len(QUESTIONS)])
            body = response.json()
            assert body["turn_index"] == n
            assert history_seen(body) == min(n, HISTORY_TURNS)  # it saw the turn the other replica just stored
            sessions.add(response.headers[SESSION])
        assert len(sessions) == 1  # both replicas named the same session
        for client in http:
            turns = (await client.get(f"/v1/conversations/{conversation}")).json()["turns"]
            assert [t["index"] for t in turns] == list(range(ALTERNATING_TURNS))
            assert [t["question"] for t in turns] == [QUESTIONS[n % len(QUESTIONS)] for n in range(ALTERNATING_TURNS)]

        # concurrent turns of one conversation through both replicas: ordered, gap-free, each saw every earlier one
        for _ in range(3):
            fresh = (await http[1].post("/v1/conversations")).json()["id"]
            replies = await asyncio.gather(*(ask(http[n % 2], fresh, f"question {n} about Kestrel") for n in range(4)))
            seen = sorted((r.json()["turn_index"], history_seen(r.json())) for r in replies)
            assert seen == [(i, i) for i in range(4)], seen
        crowded = (await http[0].post("/v1/conversations")).json()["id"]
        replies = await asyncio.gather(*(ask(http[n % 2], crowded, f"install question {n}") for n in range(8)))
        assert sorted(r.json()["turn_index"] for r in replies) == list(range(8))
        turns = (await http[1].get(f"/v1/conversations/{crowded}")).json()["turns"]
        assert [t["index"] for t in turns] == list(range(8))
        assert all(t["answer"] and t["trace"] for t in turns)
        assert [history_seen(t) for t in turns] == [min(i, HISTORY_TURNS) for i in range(8)]

        # the rolling summary, written by whichever replica ran the turn, is used by both
        wanted = ALTERNATING_TURNS - HISTORY_TURNS
        deadline = time.monotonic() + 60
        while await summary_covers(postgres_url, conversation) < wanted:
            assert time.monotonic() < deadline, "the rolling summary did not catch up"
            await asyncio.sleep(0.2)
        for n, client in enumerate(http):
            body = (await ask(client, conversation, "Summarise what we said.")).json()
            assert body["turn_index"] == ALTERNATING_TURNS + n
            assert body["trace"]["budget"]["summary"] > 0
    finally:
        stop.set()
        done = await asyncio.gather(*others, return_exceptions=True)
        for client in http:
            await client.aclose()
    for result in done:
        if isinstance(result, BaseException):
            raise result
    assert all(count > 0 for count in done)


async def test_sessions_and_their_ttl_are_shared(replicas: list[ServiceProcess]) -> None:
    a, b = replicas
    user = f"sam-{uuid.uuid4().hex[:6]}"
    async with a.async_client(user) as on_a, b.async_client(user) as on_b:
        first = (await on_a.get("/v1/session")).json()
        seen = (await on_b.get("/v1/session")).json()
        assert (seen["id"], seen["started_at"]) == (first["id"], first["started_at"])
        assert seen["last_seen"] >= first["last_seen"] and seen["expires_at"] == seen["last_seen"] + SESSION_TTL_S
        assert (await on_a.get("/v1/conversations")).headers[SESSION] == first["id"]

        await asyncio.sleep(SESSION_TTL_S + 3)  # idle past the TTL: both replicas start the same fresh session
        fresh = (await on_b.get("/v1/session")).json()
        assert fresh["id"] != first["id"] and fresh["started_at"] > first["last_seen"]
        assert (await on_a.get("/v1/session")).json()["id"] == fresh["id"]

        ended = (await on_a.post("/v1/session/logout")).json()  # logout on one replica ends it on both
        assert ended["id"] == fresh["id"]
        assert (await on_b.get("/v1/session")).json()["id"] not in (first["id"], fresh["id"])
