"""Server-side sessions: the X-Anaphora-Session header, GET /v1/session, inactivity TTL, LRU ceiling, logout."""

from __future__ import annotations

import pytest

from anaphora.server.sessions import SESSION_HEADER, MemorySessionStore
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def start(tmp_path, clock: Clock, **overrides):
    settings = settings_for(tmp_path, **overrides)
    server = serve(settings, components_for(settings, ingest=False))
    running = server.__enter__()
    running.app.state.service.sessions.clock = clock
    return server, running


@pytest.fixture
def running(tmp_path, clock):
    server, running = start(tmp_path, clock, session_ttl_s=60)
    try:
        yield running
    finally:
        server.__exit__(None, None, None)


def test_header_and_endpoint_name_one_session(running) -> None:
    with running.client("alice") as http:
        first = http.get("/v1/conversations")
        session_id = first.headers[SESSION_HEADER]
        assert http.post("/v1/conversations").headers[SESSION_HEADER] == session_id
        described = http.get("/v1/session")
        assert described.headers[SESSION_HEADER] == session_id
        body = described.json()
        assert body["object"] == "session" and body["id"] == session_id and body["user_id"] == "alice"
        assert body["expires_at"] == body["last_seen"] + 60 and body["turns_in_flight"] == 0
        assert http.get("/v1/conversations/nope").headers[SESSION_HEADER] == session_id  # errors carry it too
    with running.client("bob") as other:
        assert other.get("/v1/session").json()["id"] != session_id
    with running.client(None) as anonymous:
        assert SESSION_HEADER not in anonymous.get("/healthz").headers
        assert SESSION_HEADER not in anonymous.get("/v1/conversations").headers  # 401: no session


def test_inactivity_ttl_starts_a_fresh_session(running, clock) -> None:
    with running.client("alice") as http:
        conversation = http.post("/v1/conversations").json()["id"]
        session_id = http.get("/v1/session").json()["id"]
        clock.now += 59  # activity inside the TTL keeps it alive, and restarts the countdown
        assert http.get("/v1/session").json()["id"] == session_id
        clock.now += 59
        assert http.get("/v1/session").json()["id"] == session_id
        clock.now += 61
        fresh = http.get("/v1/session").json()
        assert fresh["id"] != session_id and fresh["started_at"] == clock.now
        assert [c["id"] for c in http.get("/v1/conversations").json()["data"]] == [conversation]
    assert running.app.state.service.sessions.expired == 1


def test_lru_ceiling_evicts_the_least_recent_session_and_loses_nothing(tmp_path, clock) -> None:
    server, running = start(tmp_path, clock, max_live_sessions=2)
    try:
        sessions = running.app.state.service.sessions
        made, seen = {}, {}
        for user in ("alice", "bob", "carol"):
            clock.now += 1
            with running.client(user) as http:
                response = http.post("/v1/conversations", json={"title": f"{user}'s"})
                made[user], seen[user] = response.json()["id"], response.headers[SESSION_HEADER]
        assert len(sessions) == 2 and sessions.evicted == 1
        with running.client("alice") as http:
            listed = http.get("/v1/conversations")
            assert listed.headers[SESSION_HEADER] != seen["alice"]  # evicted: a fresh session
            assert [c["id"] for c in listed.json()["data"]] == [made["alice"]]
            assert http.get(f"/v1/conversations/{made['alice']}").json()["title"] == "alice's"
        with running.client("carol") as http:
            assert http.get("/v1/session").json()["id"] == seen["carol"]  # the most recent ones stayed
    finally:
        server.__exit__(None, None, None)


def test_logout_clears_the_session(running) -> None:
    with running.client("alice") as http:
        conversation = http.post("/v1/conversations").json()["id"]
        session_id = http.get("/v1/session").json()["id"]
        ended = http.post("/v1/session/logout")
        assert ended.status_code == 200 and SESSION_HEADER not in ended.headers
        assert ended.json() == {"object": "session.ended", "id": session_id, "ended": True}
        assert http.get("/v1/session").json()["id"] != session_id
        assert http.get(f"/v1/conversations/{conversation}").status_code == 200
    assert len(running.app.state.service.sessions) == 1


async def test_busy_sessions_are_neither_expired_nor_evicted(clock) -> None:
    busy = {"alice"}
    sessions = MemorySessionStore(ttl_s=10, max_live=1, busy=lambda user: user in busy, clock=clock)
    alice = (await sessions.touch("alice")).id
    await sessions.touch("bob")
    assert len(sessions) == 2  # over the ceiling while alice has a turn in flight
    clock.now += 100
    assert (await sessions.touch("alice")).id == alice
    busy.clear()
    await sessions.touch("carol")
    assert len(sessions) == 1 and sessions.evicted == 2
    carol = (await sessions.touch("carol")).id
    clock.now += 100
    assert (await sessions.touch("carol")).id != carol and sessions.expired == 1
    assert await sessions.logout("nobody") is None
    assert await sessions.logout("carol") is not None and len(sessions) == 0
