"""Responses chains that are bounded and atomic, through the HTTP routes (issue 51): input capped like the other
routes, refused before anything is stored; a turn's new conversation, branch copy and input items stored with the
turn or not at all (400, 429, a failing model); long conversations read a page at a time.

The ``server_settings`` fixture picks the store: SQLite here, PostgreSQL in
tests/integration/test_response_chains_postgres.py, which runs these same tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from anaphora import FakeChatModel, ModelUnavailableError, Settings
from tests.server_harness import Running, SlowModel, components_for, serve, settings_for
from tests.unit.server.test_conversations import wait_for

pytestmark = pytest.mark.unit
EARLIER = [
    {"role": "user", "content": "How do I install Kestrel on Kubernetes?"},
    {"role": "assistant", "content": "Use the Helm chart."},
]


@pytest.fixture
def server_settings(tmp_path) -> Callable[..., Settings]:
    return lambda **overrides: settings_for(tmp_path, **overrides)


@pytest.fixture
def running(server_settings, fake_model):
    settings = server_settings()
    with serve(settings, components_for(settings, fake_model)) as server:
        yield server


def state(running: Running, user: str = "alice") -> list[tuple[str, int]]:
    """Every conversation of ``user`` with its turn count, as the API lists them."""
    with running.client(user) as http:
        listed = http.get("/v1/conversations", params={"limit": 100}).json()["data"]
    return sorted((c["id"], c["turn_count"]) for c in listed)


def ask(running: Running, **body) -> dict:
    with running.client() as http:
        reply = http.post("/v1/responses", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def chain_of(running: Running, count: int) -> list[str]:
    """A chain of ``count`` responses; their ids."""
    ids: list[str] = []
    for n in range(count):
        previous = {"previous_response_id": ids[-1]} if ids else {}
        ids.append(ask(running, input=f"How do I install Kestrel, step {n}?", **previous)["id"])
    return ids


def refusals(ids: list[str], conversation: str, question: str) -> list[dict]:
    """The same refused question sent every way a turn can be placed, each with input items to store."""
    items = [*EARLIER, {"role": "user", "content": question}]
    return [
        {"input": items, "previous_response_id": ids[0]},  # a branch
        {"input": items, "previous_response_id": ids[-1]},  # the chain's latest
        {"input": items, "conversation": conversation},
        {"input": items},  # a new chain
    ]


def test_a_question_empty_after_sanitizing_stores_nothing_however_it_is_placed(running) -> None:
    ids = chain_of(running, 2)
    conversation = ask(running, input="A conversation of its own?")["conversation"]["id"]
    before = state(running)
    with running.client() as http:
        for body in refusals(ids, conversation, "<|user|><|im_start|>"):
            for stream in (False, True):
                reply = http.post("/v1/responses", json={**body, "stream": stream})
                assert reply.status_code == 400 and "empty" in reply.text, (body, reply.text)
    assert state(running) == before


def test_a_failing_model_stores_no_branch_and_no_input_items(running, fake_model: FakeChatModel) -> None:
    ids = chain_of(running, 3)
    conversation = ask(running, input="A conversation of its own?")["conversation"]["id"]
    before = state(running)
    with running.client() as http:
        for body in refusals(ids, conversation, "And on ARM?"):
            fake_model.enqueue(ModelUnavailableError("down"))
            reply = http.post("/v1/responses", json={**body, "stream": True})
            assert reply.status_code == 503, reply.text
    assert state(running) == before


def test_a_turn_over_the_users_limit_is_refused_before_anything_is_written(server_settings) -> None:
    settings = server_settings(max_concurrent_turns_per_user=1)
    with serve(settings, components_for(settings, SlowModel(pause_s=0.05))) as running:
        ids = chain_of(running, 2)
        conversation = ask(running, input="A conversation of its own?")["conversation"]["id"]
        before = state(running)
        slow = threading.Thread(target=ask, args=(running,), kwargs={"input": "A slow question?"})
        slow.start()
        wait_for(lambda: running.runner.in_flight_for("alice") == 1)
        with running.client() as http:
            replies = [http.post("/v1/responses", json=body) for body in refusals(ids, conversation, "And on ARM?")]
        during = state(running)
        slow.join(timeout=60)
        after = state(running)
    assert [r.status_code for r in replies] == [429] * 4, [r.text for r in replies]
    assert all(r.headers.get("retry-after") for r in replies)
    assert during == before  # the slow turn is not stored yet, and the refused ones stored nothing
    assert len(after) == len(before) + 1 and set(before) < set(after)  # the slow turn's conversation, nothing else


def test_input_is_capped_like_the_other_routes_and_refused_before_anything_is_stored(running) -> None:
    pairs = [item for _ in range(10) for item in EARLIER]  # 20 items, the question makes 21
    limit = running.components.settings.server.max_message_chars
    question = {"role": "user", "content": "And on ARM?"}
    refused = [  # (body, status, param)
        ({"input": [*pairs, question]}, 422, "input"),
        ({"input": "x" * (limit + 1)}, 400, "input"),
        ({"input": [*EARLIER, {"role": "user", "content": "y" * (limit + 1)}]}, 400, "input[2]"),
        ({"input": "q?", "instructions": "i" * 16_001}, 422, "instructions"),
        ({"input": "q?", "metadata": {"k": "v" * 513}}, 422, "metadata.k"),
        ({"input": "q?", "metadata": {"k" * 65: "v"}}, 422, "metadata"),
        ({"input": "q?", "metadata": {f"k{n}": "v" for n in range(17)}}, 422, "metadata"),
    ]
    with running.client() as http:
        for body, status, param in refused:
            reply = http.post("/v1/responses", json=body)
            error = reply.json()["error"]
            assert reply.status_code == status, (param, reply.text)
            assert error["param"].startswith(param) and any(ch.isdigit() for ch in error["message"]), error
        too_big = http.post(
            "/v1/responses",
            content=b'{"input": "' + b"z" * 2_100_000 + b'"}',
            headers={"content-type": "application/json"},
        )
        assert too_big.status_code == 413 and "2000000 bytes" in too_big.json()["error"]["message"]
    assert state(running) == []
    accepted = ask(running, input=[{"role": "developer", "content": "Be brief."}, *pairs[:18], question])
    assert accepted["anaphora"]["turn_index"] == 9  # 20 items: nine earlier turns, then the question


def test_a_branch_is_stored_with_its_turn_under_the_id_the_stream_announced(running) -> None:
    ids = chain_of(running, 3)
    original = ids[0].rsplit("_", 1)[0].removeprefix("resp_")
    with running.client() as http:
        body = {"input": [*EARLIER, {"role": "user", "content": "And on ARM?"}], "previous_response_id": ids[0]}
        with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as reply:
            lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
        events = [json.loads(line[6:]) for line in lines]
        branch = events[-1]["response"]
        turns = http.get(f"/v1/conversations/{branch['conversation']['id']}").json()["turns"]
        kept = http.get(f"/v1/conversations/{original}").json()["turns"]
    assert events[0]["response"]["id"] == branch["id"] and branch["id"].endswith("_2")
    assert branch["conversation"]["id"] != original and branch["previous_response_id"].endswith("_1")
    assert [t["question"] for t in turns] == [
        "How do I install Kestrel, step 0?",
        EARLIER[0]["content"],
        "And on ARM?",
    ]
    assert turns[1]["answer"] == EARLIER[1]["content"] and turns[1]["trace"]["route_reason"] == "added as items"
    assert len(kept) == 3


def test_a_long_conversation_is_read_a_page_at_a_time(running) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations", json={"items": EARLIER * 10}).json()["id"]
        for _ in range(2):
            assert http.post(f"/v1/conversations/{conversation}/items", json={"items": EARLIER * 10}).status_code == 200
        assert http.post(f"/v1/conversations/{conversation}/items", json={"items": EARLIER * 11}).status_code == 422

        def page(**params) -> tuple[list[int], bool]:
            body = http.get(f"/v1/conversations/{conversation}", params=params).json()
            return [t["index"] for t in body["turns"]], body["has_more"]

        assert page(limit=10) == (list(range(20, 30)), True)
        assert page(limit=10, before=20) == (list(range(10, 20)), True)
        assert page(limit=10, before=5) == (list(range(5)), False)
        assert page() == (list(range(30)), False)
        assert http.get(f"/v1/conversations/{conversation}", params={"limit": 1001}).status_code == 422

        def items(order: str) -> list[str]:
            seen: list[str] = []
            after: dict = {}
            while True:
                body = http.get(
                    f"/v1/conversations/{conversation}/items", params={"limit": 7, "order": order, **after}
                ).json()
                seen += [item["id"] for item in body["data"]]
                if not body["has_more"]:
                    return seen
                after = {"after": body["last_id"]}

        ascending = items("asc")
        assert ascending == [f"msg_{conversation}_{n}" for n in range(60)]
        assert items("desc") == ascending[::-1]
        wrong = http.get(f"/v1/conversations/{conversation}/items", params={"after": f"msg_{conversation}_60"})
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "after"


def test_requests_continuing_the_same_response_at_once_each_follow_it(server_settings) -> None:
    """Two requests continue the chain's latest response together: the first is appended, the second (which finds
    a turn after that response when it runs) is stored as a branch from it; both name it as their previous."""
    settings = server_settings()
    with serve(settings, components_for(settings, SlowModel(pause_s=0.02))) as running:
        root = chain_of(running, 1)[0]
        replies: list[dict] = []
        threads = [
            threading.Thread(target=lambda q=q: replies.append(ask(running, input=q, previous_response_id=root)))
            for q in ("And on ARM?", "What about its memory limits?")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        turns = [running_turns(running, r["conversation"]["id"]) for r in replies]
    # each follows the root: in its conversation, or in a branch whose first turn is the root's (a copy, its own id)
    assert len(replies) == 2 and root in {r["previous_response_id"] for r in replies}
    assert all(r["id"].endswith("_1") and r["previous_response_id"].endswith("_0") for r in replies)
    assert len({r["conversation"]["id"] for r in replies}) == 2
    assert [len(t) for t in turns] == [2, 2] and turns[0][0] == turns[1][0]


def running_turns(running: Running, conversation: str) -> list[tuple[str, str]]:
    with running.client() as http:
        return [(t["question"], t["answer"]) for t in http.get(f"/v1/conversations/{conversation}").json()["turns"]]
