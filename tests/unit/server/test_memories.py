"""The memories API: list (paginated, with provenance), forget one, forget all; each user's own, another user's ids
answered as missing (404, the same body as an id that never existed); erase counts every memory row."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from anaphora.memory.types import EntityMention
from anaphora.testing.memory_contract import EMBEDDER, episode, fact
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
MEMORY_TABLES = ("memory_items", "memory_vectors", "memory_entities", "memory_profiles")


@pytest.fixture
def running(tmp_path, fake_model):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, fake_model, ingest=False)) as server:
        yield server


def remember(running, user: str, count: int = 3, *, start: float = 1000.0) -> list[str]:
    """``count`` episodes (conversation c-USER, turns 0..) and one fact from turns 1 and 2, with vectors."""
    store = running.components.memory
    items = [
        episode(user, f"{user}: note {n} about kestrel", conversation=f"c-{user}", turn=n, time=start + n)
        for n in range(count)
    ]
    chart = fact(user, "chart version", "2.8.0", time=start + count)
    items.append(replace(chart, conversation_id=f"c-{user}", turns=(1, 2)))

    async def write():
        await store.add(user, items, EMBEDDER.embed([i.text for i in items]))
        await store.upsert_entities(user, [EntityMention("Kestrel", "product", start)])
        await store.set_profile(user, f"{user} runs Kestrel", [f"c-{user}"])

    asyncio.run(write())
    return [i.id for i in items]


def rows(running, user: str) -> dict[str, int]:
    database = running.components.database
    return {t: database.query(f"SELECT COUNT(*) FROM {t} WHERE user_id = ?", (user,))[0][0] for t in MEMORY_TABLES}


def test_list_pages_newest_first_with_provenance(running) -> None:
    ids = remember(running, "alice", count=4)
    with running.client("alice") as http:
        first = http.get("/v1/memories", params={"limit": 2})
        assert first.status_code == 200
        page = first.json()
        assert page["object"] == "list" and page["limit"] == 2 and page["has_more"] is True
        chart, newest = page["data"]
        assert chart["id"] == ids[-1] and chart["kind"] == "fact" and chart["object"] == "memory"
        assert chart["provenance"] == {"conversation_id": "c-alice", "turns": [1, 2], "time": 1004.0, "said_by": "user"}
        assert (chart["attribute"], chart["value"], chart["current"]) == ("chart version", "2.8.0", True)
        assert chart["valid_from"] == 1004.0 and chart["valid_to"] is None
        assert newest["kind"] == "episode" and newest["provenance"]["turns"] == [3] and newest["value"] is None
        rest = http.get("/v1/memories", params={"limit": 2, "offset": 2}).json()
        last = http.get("/v1/memories", params={"limit": 2, "offset": 4}).json()
        assert last["has_more"] is False
        seen = [m["id"] for m in page["data"] + rest["data"] + last["data"]]
        assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
        facts = http.get("/v1/memories", params={"kind": "fact"}).json()["data"]
        assert [m["id"] for m in facts] == [ids[-1]]


def test_bad_parameters_are_refused_with_reasons(running) -> None:
    with running.client("alice") as http:
        for params in ({"limit": 0}, {"limit": 101}, {"offset": -1}, {"kind": "secrets"}):
            refused = http.get("/v1/memories", params=params)
            assert refused.status_code == 422, params
            assert refused.json()["error"]["message"]


def test_a_user_sees_and_forgets_only_their_own_memories(running) -> None:
    alice_ids = remember(running, "alice")
    bob_ids = remember(running, "bob")
    with running.client("alice") as alice, running.client("bob") as bob:
        assert {m["id"] for m in bob.get("/v1/memories", params={"limit": 100}).json()["data"]} == set(bob_ids)
        stolen = bob.delete(f"/v1/memories/{alice_ids[0]}")
        missing = bob.delete("/v1/memories/no-such-memory")
        assert stolen.status_code == missing.status_code == 404
        assert stolen.json()["error"]["type"] == missing.json()["error"]["type"] == "not_found_error"
        assert stolen.json()["error"]["message"] == f"no memory {alice_ids[0]!r}"  # nothing says whose it is
        assert stolen.json()["error"]["hint"] == missing.json()["error"]["hint"]
        assert {m["id"] for m in alice.get("/v1/memories", params={"limit": 100}).json()["data"]} == set(alice_ids)

        forgotten = alice.delete(f"/v1/memories/{alice_ids[0]}")
        assert forgotten.json() == {"id": alice_ids[0], "object": "memory.deleted", "deleted": True}
        assert alice.delete(f"/v1/memories/{alice_ids[0]}").status_code == 404
        left = {m["id"] for m in alice.get("/v1/memories", params={"limit": 100}).json()["data"]}
        assert left == set(alice_ids[1:])


def test_forget_all_removes_every_memory_row_of_the_caller_only(running) -> None:
    remember(running, "alice")
    bob_ids = remember(running, "bob")
    bob_rows = rows(running, "bob")
    with running.client("alice") as alice, running.client("bob") as bob:
        erased = alice.delete("/v1/memories")
        assert erased.status_code == 200
        assert erased.json() == {"object": "memory.erased", "memories": 4, "vectors": 4, "entities": 1, "profiles": 1}
        assert alice.get("/v1/memories").json()["data"] == []
        assert all(n == 0 for n in rows(running, "alice").values())
        assert rows(running, "bob") == bob_rows
        assert {m["id"] for m in bob.get("/v1/memories", params={"limit": 100}).json()["data"]} == set(bob_ids)
        again = alice.delete("/v1/memories").json()
        assert again == {"object": "memory.erased", "memories": 0, "vectors": 0, "entities": 0, "profiles": 0}


def test_right_to_erase_removes_memory_with_the_conversations(running) -> None:
    remember(running, "alice")
    remember(running, "bob")
    bob_rows = rows(running, "bob")
    with running.client("alice") as alice:
        alice.post("/v1/conversations", json={"title": "one"}).raise_for_status()
        erased = alice.delete("/v1/users/alice/data").json()
    assert erased["conversations"] == 1
    assert (erased["memories"], erased["memory_vectors"], erased["entities"], erased["profiles"]) == (4, 4, 1, 1)
    assert all(n == 0 for n in rows(running, "alice").values())
    assert rows(running, "bob") == bob_rows
