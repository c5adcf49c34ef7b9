"""The conversations API: CRUD, pagination, turns as JSON and SSE, ordering, disconnects, limits, shutdown."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from anaphora import FakeChatModel
from tests.server_harness import SlowModel, bearer, components_for, serve, settings_for, sse_events

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"


@pytest.fixture
def running(tmp_path, fake_model):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, fake_model)) as server:
        yield server


def wait_for(predicate, timeout_s: float = 15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_create_list_read_delete(running) -> None:
    with running.client() as http:
        created = http.post("/v1/conversations", json={"title": "kestrel"})
        assert created.status_code == 201
        conversation = created.json()
        assert conversation["object"] == "conversation" and conversation["title"] == "kestrel"
        assert conversation["turn_count"] == 0 and conversation["created_at"] > 0
        untitled = http.post("/v1/conversations")  # the body is optional
        assert untitled.status_code == 201 and untitled.json()["title"] == ""

        detail = http.get(f"/v1/conversations/{conversation['id']}").json()
        assert detail["id"] == conversation["id"] and detail["turns"] == []

        deleted = http.delete(f"/v1/conversations/{conversation['id']}")
        assert deleted.json() == {"id": conversation["id"], "object": "conversation.deleted", "deleted": True}
        assert http.get(f"/v1/conversations/{conversation['id']}").status_code == 404
        assert http.delete(f"/v1/conversations/{conversation['id']}").status_code == 404
        assert [c["id"] for c in http.get("/v1/conversations").json()["data"]] == [untitled.json()["id"]]


def test_pagination_most_recent_first(running) -> None:
    with running.client() as http:
        ids = []
        for title in ("a", "b", "c"):
            ids.append(http.post("/v1/conversations", json={"title": title}).json()["id"])
            time.sleep(0.01)
        first = http.get("/v1/conversations", params={"limit": 2}).json()
        assert [c["title"] for c in first["data"]] == ["c", "b"]
        assert first["has_more"] is True and first["limit"] == 2 and first["offset"] == 0
        rest = http.get("/v1/conversations", params={"limit": 2, "offset": 2}).json()
        assert [c["title"] for c in rest["data"]] == ["a"] and rest["has_more"] is False
        # a new turn makes a conversation the most recent
        assert http.post(f"/v1/conversations/{ids[0]}/messages", json={"content": QUESTION}).status_code == 200
        assert [c["title"] for c in http.get("/v1/conversations").json()["data"]] == ["a", "c", "b"]
        assert http.get("/v1/conversations", params={"limit": 101}).status_code == 422
        assert http.get("/v1/conversations", params={"offset": -1}).status_code == 422


def test_messages_json_then_stream_and_read_back(running, fake_model) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        first = http.post(f"/v1/conversations/{conversation}/messages", json={"content": QUESTION})
        assert first.status_code == 200
        answer = first.json()
        assert answer["object"] == "conversation.turn" and answer["turn_index"] == 0
        assert answer["conversation_id"] == conversation and answer["question"] == QUESTION
        assert answer["citations"] and answer["trace"]["retrieved"]

        with http.stream(
            "POST", f"/v1/conversations/{conversation}/messages", json={"content": "And on ARM?", "stream": True}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = sse_events(response)
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        details = chunks[-1]["anaphora"]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
        assert details["conversation_id"] == conversation and details["turn_index"] == 1
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])

        # the second turn saw the first one
        assert [m.role for m in fake_model.history[-1]] == ["system", "user", "assistant", "user"]

        detail = http.get(f"/v1/conversations/{conversation}").json()
        assert detail["turn_count"] == 2 and detail["title"] == QUESTION  # untitled: named after the first question
        turns = detail["turns"]
        assert [t["index"] for t in turns] == [0, 1]
        assert turns[0]["answer"] == answer["answer"] and turns[0]["citations"] == answer["citations"]
        assert turns[1]["question"] == "And on ARM?" and turns[1]["answer"] == streamed
        assert turns[1]["citations"] == details["citations"] and turns[1]["trace"]["question"] == "And on ARM?"


def test_unknown_conversation_is_404_streaming_or_not(running) -> None:
    with running.client() as http:
        for stream in (False, True):
            response = http.post("/v1/conversations/nope/messages", json={"content": QUESTION, "stream": stream})
            assert response.status_code == 404
            assert response.json()["error"]["type"] == "not_found_error"


def test_disconnect_mid_stream_still_stores_the_complete_turn(tmp_path) -> None:
    settings = settings_for(tmp_path, answer_check="off")
    model = SlowModel(pause_s=0.05)
    with serve(settings, components_for(settings, model)) as running, running.client() as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        received = []
        with http.stream(
            "POST", f"/v1/conversations/{conversation}/messages", json={"content": QUESTION, "stream": True}
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"content":"F' in line:
                    received.append(line)
                    break  # one chunk of text, then hang up
        assert received
        detail = wait_for(lambda: (d := http.get(f"/v1/conversations/{conversation}").json())["turn_count"] == 1 and d)
        turn = detail["turns"][0]
        assert turn["index"] == 0 and turn["question"] == QUESTION
        assert turn["answer"].startswith("First sentence here. Second sentence here. Third sentence here.")
        assert turn["citations"] and turn["trace"]["question"] == QUESTION
        assert turn["answer"] == SlowModel.long_answer(model.history[-1]).strip()
        wait_for(lambda: running.runner.in_flight == 0)
        assert running.runner.in_flight_for("alice") == 0  # the slot came back when the turn ended


def test_a_client_that_times_out_does_not_lose_its_turn(tmp_path) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, FakeChatModel(delay_s=0.6))) as running, running.client() as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        with pytest.raises(httpx.ReadTimeout):
            http.post(f"/v1/conversations/{conversation}/messages", json={"content": QUESTION}, timeout=0.2)
        wait_for(lambda: http.get(f"/v1/conversations/{conversation}").json()["turn_count"] == 1)


async def test_parallel_messages_on_one_conversation_are_serialised(tmp_path) -> None:
    settings = settings_for(tmp_path, max_concurrent_turns_per_user=5)
    model = FakeChatModel(delay_s=0.05)
    with serve(settings, components_for(settings, model)) as running:
        async with httpx.AsyncClient(base_url=running.url, headers=bearer("alice"), timeout=30) as http:
            conversation = (await http.post("/v1/conversations", json={})).json()["id"]
            questions = [f"Question {n} about installing Kestrel?" for n in range(5)]
            replies = await asyncio.gather(
                *(http.post(f"/v1/conversations/{conversation}/messages", json={"content": q}) for q in questions)
            )
            assert [r.status_code for r in replies] == [200] * 5
            by_index = {r.json()["turn_index"]: r.json()["question"] for r in replies}
            assert sorted(by_index) == [0, 1, 2, 3, 4]
            turns = (await http.get(f"/v1/conversations/{conversation}")).json()["turns"]
        assert [t["index"] for t in turns] == [0, 1, 2, 3, 4]
        assert {t["index"]: t["question"] for t in turns} == by_index
        assert sorted(t["question"] for t in turns) == sorted(questions)
        # one at a time: each turn's prompt held every earlier turn (0, 1, 2, 3, 4 turns of history)
        assert [(len(call) - 2) // 2 for call in model.history] == [0, 1, 2, 3, 4]
        assert not running.runner.lock.busy()  # no lock left behind


async def test_too_many_turns_in_flight_get_429_with_retry_after(tmp_path) -> None:
    settings = settings_for(tmp_path, max_concurrent_turns_per_user=2)
    with serve(settings, components_for(settings, FakeChatModel(delay_s=1.0))) as running:
        body = {"messages": [{"role": "user", "content": QUESTION}]}
        async with httpx.AsyncClient(base_url=running.url, headers=bearer("alice"), timeout=30) as alice:
            slow = [asyncio.create_task(alice.post("/v1/chat/completions", json=body)) for _ in range(2)]
            while running.runner.in_flight_for("alice") < 2:
                await asyncio.sleep(0.01)
            refused = await alice.post("/v1/chat/completions", json=body)
            async with httpx.AsyncClient(base_url=running.url, headers=bearer("bob"), timeout=30) as bob:
                other_user = asyncio.create_task(bob.post("/v1/chat/completions", json=body))
                assert [r.status_code for r in await asyncio.gather(*slow)] == [200, 200]
                assert (await other_user).status_code == 200  # the limit is per user
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["type"] == "rate_limit_error"
            assert (await alice.post("/v1/chat/completions", json=body)).status_code == 200  # slots came back


def test_shutdown_lets_in_flight_turns_finish_and_store(tmp_path) -> None:
    settings = settings_for(tmp_path, answer_check="off")
    model = SlowModel(pause_s=0.05)
    with serve(settings, components_for(settings, model)) as running:
        with running.client() as http:
            streamed = http.post("/v1/conversations", json={}).json()["id"]
            waited = http.post("/v1/conversations", json={}).json()["id"]
            with http.stream(
                "POST", f"/v1/conversations/{streamed}/messages", json={"content": QUESTION, "stream": True}
            ) as response:
                next(line for line in response.iter_lines() if '"content":"F' in line)  # then hang up
        outcome: dict = {}

        def blocking_request() -> None:
            with running.client() as client:
                outcome["response"] = client.post(f"/v1/conversations/{waited}/messages", json={"content": QUESTION})

        worker = threading.Thread(target=blocking_request)
        worker.start()
        wait_for(lambda: running.runner.in_flight == 2)
        running.stop()  # graceful: waits for the open request, then the lifespan drains the disconnected turn
        worker.join(timeout=30)
        assert outcome["response"].status_code == 200
        store = running.components.conversations
        for conversation in (streamed, waited):
            turns = asyncio.run(store.turns("alice", conversation))
            assert len(turns) == 1 and turns[0].answer.startswith("First sentence here.")
