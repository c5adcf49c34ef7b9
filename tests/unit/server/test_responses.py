"""The Responses API and the Conversations resource through the official openai client, against a real uvicorn
server: plain and streamed responses, previous_response_id chains, conversation=, store: false, isolation."""

from __future__ import annotations

import asyncio

import openai
import pytest

from anaphora import FakeChatModel, ModelUnavailableError
from anaphora.models.base import ChatStream
from anaphora.pipeline.query import QueryPlan
from anaphora.pipeline.stages import QueryPlanner
from anaphora.store.chains import response_turn
from anaphora.store.protocols import Conversation, StoredTurn
from tests.server_harness import SlowModel, components_for, serve, settings_for, token
from tests.unit.server import test_openai as chat_tests
from tests.unit.server.test_conversations import wait_for

pytestmark = pytest.mark.unit
running = chat_tests.running  # the same live server (fake model, sample docs) and the same openai client
client = chat_tests.client
DEMO = [
    "How do I install Kestrel on Kubernetes?",
    "And on ARM?",
    "What about its memory limits?",
    "What happens when it hits that limit?",
    "How do I check whether it was OOMKilled?",
]
EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
CLOSING = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def extension(obj) -> dict:
    return (obj.model_extra or {})["anaphora"]


def test_a_plain_response_has_openai_shape_annotations_usage_and_the_trace(running) -> None:
    with client(running) as openai_client:
        response = openai_client.responses.create(model="anaphora", input=DEMO[0])
    assert response.object == "response" and response.status == "completed" and response.id.startswith("resp_")
    assert response.output_text and response.output_text == response.output[0].content[0].text
    message = response.output[0]
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    details = extension(response)
    cited = [c["id"] for c in details["citations"]]
    annotations = message.content[0].annotations
    assert cited and [a.file_id for a in annotations] == cited
    assert all(a.type == "file_citation" and a.filename.endswith(".md") for a in annotations)
    assert all(0 <= a.index <= len(response.output_text) for a in annotations)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert details["trace"]["question"] == DEMO[0] and details["trace"]["retrieved"]
    assert response.previous_response_id is None and response.conversation.id == details["conversation_id"]


def test_a_streamed_response_sends_the_event_sequence_and_usage_last(running) -> None:
    with client(running) as openai_client:
        events = list(openai_client.responses.create(model="anaphora", input=DEMO[0], stream=True))
        stored = openai_client.responses.retrieve(events[-1].response.id)
    kinds = [e.type for e in events]
    assert kinds[:4] == EVENTS and kinds[-4:] == CLOSING
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text == final.output_text == stored.output_text
    assert events[0].response.id == final.id == stored.id and events[0].response.status == "in_progress"
    assert final.usage.output_tokens > 0 and final.output[0].content[0].annotations
    assert extension(final)["trace"]["question"] == DEMO[0]


def test_the_client_stream_helper_accumulates_the_final_response(running) -> None:
    with client(running) as openai_client, openai_client.responses.stream(model="anaphora", input=DEMO[0]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text and final.output[0].content[0].annotations


def chain(openai_client: openai.OpenAI, questions: list[str], **kwargs) -> list:
    answers, previous = [], None
    for question in questions:
        response = openai_client.responses.create(
            model="anaphora", input=question, previous_response_id=previous, **kwargs
        )
        answers.append(response)
        previous = response.id
    return answers


def test_a_previous_response_id_chain_a_conversation_and_chat_completions_retrieve_alike(running) -> None:
    """The same five messages give the same retrieval queries, whichever way the history is held."""
    with client(running) as openai_client:
        chained = chain(openai_client, DEMO)
        conversation = openai_client.conversations.create()
        held = [openai_client.responses.create(model="anaphora", input=q, conversation=conversation.id) for q in DEMO]
        history: list[dict] = []
        stateless = []
        for question, answer in zip(DEMO, chained, strict=True):
            history.append({"role": "user", "content": question})
            completion = openai_client.chat.completions.create(model="anaphora", messages=history)
            stateless.append(completion)
            history.append({"role": "assistant", "content": answer.output_text})
    queries = [extension(r)["trace"]["query"] for r in chained]
    assert queries == [extension(r)["trace"]["query"] for r in held]
    assert queries == [extension(c)["trace"]["query"] for c in stateless]
    assert queries[1] != DEMO[1]  # the follow-up was expanded from its history
    assert [r.output_text for r in chained] == [r.output_text for r in held]
    assert [r.previous_response_id for r in chained[1:]] == [r.id for r in chained[:-1]]
    assert len({r.conversation.id for r in chained}) == 1  # the chain is held as one conversation
    assert all(r.conversation.id == conversation.id for r in held)


def test_conversation_items_list_each_turn_and_accept_turns_answered_elsewhere(running) -> None:
    with client(running) as openai_client:
        conversation = openai_client.conversations.create(
            items=[
                {"type": "message", "role": "user", "content": DEMO[0]},
                {"type": "message", "role": "assistant", "content": "Use the Helm chart."},
            ]
        )
        response = openai_client.responses.create(model="anaphora", input=DEMO[1], conversation=conversation.id)
        added = openai_client.conversations.items.create(
            conversation.id,
            items=[
                {"type": "message", "role": "user", "content": "Thanks!"},
                {"type": "message", "role": "assistant", "content": "You are welcome."},
            ],
        )
        page = openai_client.conversations.items.list(conversation.id, limit=2)
        newest_first = list(openai_client.conversations.items.list(conversation.id, limit=2))  # pages on
        oldest_first = list(openai_client.conversations.items.list(conversation.id, order="asc"))
        fetched = openai_client.conversations.retrieve(conversation.id)
        deleted = openai_client.conversations.delete(conversation.id)
        with pytest.raises(openai.NotFoundError):
            openai_client.conversations.items.list(conversation.id)
    assert [i.role for i in oldest_first] == ["user", "assistant"] * 3
    assert [i.content[0].text for i in oldest_first[::2]] == [DEMO[0], DEMO[1], "Thanks!"]
    assert oldest_first[3].content[0].text == response.output_text and oldest_first[3].content[0].annotations
    assert oldest_first[3].id == response.output[0].id
    assert [i.id for i in page.data] == [i.id for i in oldest_first[::-1]][:2] and page.has_more
    assert [i.id for i in newest_first] == [i.id for i in oldest_first[::-1]]  # the client follows has_more
    assert [i.content[0].text for i in added.data] == ["Thanks!", "You are welcome."]
    assert extension(response)["trace"]["query"] != DEMO[1]  # the added turn is history for the follow-up
    assert (fetched.model_extra or {})["turn_count"] == 3 and deleted.deleted


def test_input_items_retrieve_and_delete_a_stored_response(running) -> None:
    with client(running) as openai_client:
        first, second = chain(openai_client, DEMO[:2])
        inputs = list(openai_client.responses.input_items.list(second.id))
        again = openai_client.responses.retrieve(second.id)
        deleted = openai_client.responses.delete(second.id)  # returns None in the client: the chain is gone
        with pytest.raises(openai.NotFoundError):
            openai_client.responses.retrieve(first.id)
    assert deleted is None
    assert [i.content[0].text for i in inputs] == [DEMO[1]] and inputs[0].role == "user"
    assert again.output_text == second.output_text and again.previous_response_id == first.id
    assert extension(again)["trace"]["query"] == extension(second)["trace"]["query"]


def test_every_response_of_a_chain_is_readable_right_after_its_reply(running) -> None:
    with client(running) as openai_client:
        answered, read = [], []
        for response in chain(openai_client, DEMO[:3]):
            answered.append(response)
            read.append(openai_client.responses.retrieve(response.id))  # the very next request sees the turn
        earlier = [openai_client.responses.retrieve(r.id) for r in answered]  # turns before the latest, too
        inputs = [next(iter(openai_client.responses.input_items.list(r.id))).content[0].text for r in answered]
    for got in (read, earlier):
        assert [r.output_text for r in got] == [r.output_text for r in answered]
        assert [r.previous_response_id for r in got] == [None, answered[0].id, answered[1].id]
    assert inputs == DEMO[:3]


class GrowingStore:
    """A conversation whose second turn is stored between the read of the conversation and the read of its turns."""

    def __init__(self) -> None:
        self.stored = [StoredTurn(index=n, question=f"q{n}", answer=f"a{n}", created_at=0.0) for n in range(2)]

    async def get(self, user_id: str, conversation_id: str) -> Conversation:
        return Conversation(id=conversation_id, user_id=user_id, title="", created_at=0, updated_at=0, turn_count=1)

    async def turns(
        self, user_id: str, conversation_id: str, *, last: int | None = None, start: int = 0, stop: int | None = None
    ) -> list[StoredTurn]:
        chosen = [t for t in self.stored if start <= t.index < (len(self.stored) if stop is None else stop)]
        return chosen[-last:] if last is not None else chosen


def test_a_response_read_while_its_chain_grows_is_still_found() -> None:
    conversation_id, turn = asyncio.run(response_turn(GrowingStore(), "alice", "resp_c1_0"))
    assert (conversation_id, turn.index, turn.answer) == ("c1", 0, "a0")


def server_timing(response) -> float:
    name, _, duration = response.headers["server-timing"].partition(";")
    assert name == "engine" and duration.startswith("dur=")
    return float(duration.removeprefix("dur="))


def test_turn_replies_carry_the_engines_own_time_in_server_timing(running) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        replies = {
            "responses": http.post("/v1/responses", json={"input": DEMO[0]}),
            "chat": http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": DEMO[0]}]}),
            "conversations": http.post(f"/v1/conversations/{conversation}/messages", json={"content": DEMO[0]}),
        }
    traces = {
        "responses": replies["responses"].json()["anaphora"]["trace"],
        "chat": replies["chat"].json()["anaphora"]["trace"],
        "conversations": replies["conversations"].json()["trace"],
    }
    for route, reply in replies.items():
        stages = sum(stage["ms"] for stage in traces[route]["stages"])
        assert stages <= server_timing(reply) < 30_000, route  # the stages, the history and the stored turn


def test_a_branch_from_an_earlier_response_keeps_both_chains(running) -> None:
    with client(running) as openai_client:
        first, second = chain(openai_client, DEMO[:2])
        branch = openai_client.responses.create(model="anaphora", input=DEMO[2], previous_response_id=first.id)
        still = openai_client.responses.retrieve(second.id)
    assert branch.conversation.id != first.conversation.id
    assert extension(branch)["turn_index"] == 1 and still.output_text == second.output_text
    with running.client() as http:
        turns = http.get(f"/v1/conversations/{branch.conversation.id}").json()["turns"]
    assert [t["question"] for t in turns] == [DEMO[0], DEMO[2]]
    store = running.components.conversations
    [original] = asyncio.run(store.turns("alice", first.conversation.id))[:1]
    copied = asyncio.run(store.turns("alice", branch.conversation.id))[0]
    assert original.shown_passages and copied.shown_passages == original.shown_passages  # what the next turn reads
    assert copied.window_start == original.window_start == 0


def test_store_false_leaves_no_turn_and_no_memory(running) -> None:
    with client(running) as openai_client:
        kept = openai_client.responses.create(model="anaphora", input=DEMO[0])
        temporary = openai_client.responses.create(
            model="anaphora", input="My chart version is 2.7.1, what changes when I upgrade?", store=False
        )
        follow_up = openai_client.responses.create(
            model="anaphora", input=DEMO[1], previous_response_id=kept.id, store=False
        )
        with pytest.raises(openai.NotFoundError):
            openai_client.responses.retrieve(temporary.id)
        # the control: the same kind of statement, stored, is remembered
        openai_client.responses.create(
            model="anaphora", input="My chart version is 2.8.0, what changes then?", previous_response_id=kept.id
        )
    assert temporary.store is False and temporary.conversation is None and temporary.output_text
    assert extension(follow_up)["trace"]["query"] != DEMO[1]  # the chain was its history
    with running.client() as http:
        texts = wait_for(lambda: [m["text"] for m in http.get("/v1/memories").json()["data"] if "2.8.0" in m["text"]])
        memories = http.get("/v1/memories", params={"limit": 100}).json()["data"]
        conversations = http.get("/v1/conversations").json()["data"]
    assert texts and all("2.7.1" not in m["text"] for m in memories)
    assert [c["turn_count"] for c in conversations] == [2]  # the stored chain's two turns, nothing else


def test_another_users_response_is_a_404_like_a_missing_one(running) -> None:
    with client(running, token("alice")) as alice:
        mine = alice.responses.create(model="anaphora", input=DEMO[0])
    with running.client("bob") as bob:
        theirs = [bob.get(f"/v1/responses/{mine.id}"), bob.get(f"/v1/responses/{mine.id}/input_items")]
        follow = bob.post("/v1/responses", json={"input": DEMO[1], "previous_response_id": mine.id})
        erase = bob.delete(f"/v1/responses/{mine.id}")
    with running.client("alice") as alice_http:
        assert alice_http.delete(f"/v1/responses/{mine.id}").status_code == 200
        missing = alice_http.get(f"/v1/responses/{mine.id}")
    assert all(r.status_code == 404 for r in [*theirs, follow, erase, missing])
    assert theirs[0].json() == missing.json() == follow.json() == erase.json()


def test_another_users_conversation_is_a_404_like_a_missing_one(running) -> None:
    with running.client("alice") as alice:
        conversation = alice.post("/v1/conversations", json={}).json()["id"]
    item = {"role": "user", "content": DEMO[0]}
    with running.client("bob") as bob:
        asked = bob.post("/v1/responses", json={"input": DEMO[0], "conversation": conversation})
        listed = bob.get(f"/v1/conversations/{conversation}/items")
        added = bob.post(
            f"/v1/conversations/{conversation}/items", json={"items": [item, {**item, "role": "assistant"}]}
        )
        missing = bob.post("/v1/responses", json={"input": DEMO[0], "conversation": "000000000000"})
    assert [r.status_code for r in (asked, listed, added, missing)] == [404] * 4
    assert asked.json()["error"]["message"] == f"no conversation {conversation!r}"
    assert {k: v for k, v in missing.json()["error"].items() if k != "message"} == {
        k: v for k, v in asked.json()["error"].items() if k != "message"
    }
    with running.client("alice") as alice:
        assert alice.get(f"/v1/conversations/{conversation}").json()["turn_count"] == 0  # bob added nothing


UNSUPPORTED = [  # (extra parameters, what the message names, the error's param, its code)
    ({"tools": [{"type": "web_search"}]}, "tools", "tools", "unsupported_parameter"),
    ({"reasoning": {"effort": "low"}}, "reasoning", "reasoning", "unsupported_parameter"),
    ({"top_logprobs": 2}, "top_logprobs", "top_logprobs", "unsupported_parameter"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]},
     "input_image", "input[0].content[0].type", "unsupported_value"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "{}"}]}, "function_call_output",
     "input[0].type", "unsupported_value"),
    ({"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}, "the user's question",
     "input[1].role", "invalid_value"),
    ({"previous_response_id": "resp_x_0", "conversation": "conv"}, "cannot be used together", "conversation",
     "conflicting_parameters"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "named", "param", "code"), UNSUPPORTED)
def test_unsupported_parameters_are_a_400_naming_them(running, extra, named, param, code) -> None:
    with running.client() as http:
        reply = http.post("/v1/responses", json={"model": "anaphora", "input": DEMO[0], **extra})
        listed = http.get("/v1/conversations").json()["data"]
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert named in error["message"] and error["hint"]
    assert (error["param"], error["code"]) == (param, code)
    assert listed == []  # refused before anything was stored


@pytest.mark.parametrize(("extra", "named", "param", "code"), UNSUPPORTED)
def test_unsupported_parameters_reach_the_client_as_bad_request_with_param_and_code(
    running, extra, named, param, code
) -> None:
    body = {"input": DEMO[0], **extra}
    with client(running) as openai_client, pytest.raises(openai.BadRequestError, match=named) as refused:
        openai_client.responses.create(model="anaphora", **body)
    assert (refused.value.param, refused.value.code) == (param, code)
    assert refused.value.type == "invalid_request_error"


def test_a_schema_violation_reaches_the_client_with_the_field_as_param(running) -> None:
    with client(running) as openai_client, pytest.raises(openai.UnprocessableEntityError) as refused:
        openai_client.responses.create(model="anaphora", input=DEMO[0], temperature=7)
    assert (refused.value.param, refused.value.code) == ("temperature", "invalid_value")
    with client(running) as openai_client, pytest.raises(openai.UnprocessableEntityError) as refused:
        openai_client.responses.create(model="anaphora", input=DEMO[0], extra_body={"store": "yes"})
    assert (refused.value.param, refused.value.code) == ("store", "invalid_type")


def test_an_unknown_response_is_a_not_found_with_a_code(running) -> None:
    with client(running) as openai_client, pytest.raises(openai.NotFoundError) as missing:
        openai_client.responses.retrieve("resp_nothing_0")
    assert (missing.value.param, missing.value.code) == (None, "not_found")


def test_a_failing_model_gets_its_status_and_leaves_no_empty_conversation(running, fake_model) -> None:
    fake_model.enqueue(ModelUnavailableError("down"))
    with client(running) as openai_client, pytest.raises(openai.InternalServerError) as down:
        openai_client.responses.create(model="anaphora", input=DEMO[0], stream=True)
    assert down.value.status_code == 503
    with running.client() as http:
        assert http.get("/v1/conversations").json()["data"] == []


def test_a_client_that_leaves_mid_stream_still_gets_its_turn_stored(tmp_path) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, SlowModel())) as running, running.client() as http:
        with http.stream("POST", "/v1/responses", json={"input": DEMO[0], "stream": True}) as reply:
            for line in reply.iter_lines():
                if "response.output_text.delta" in line:
                    break  # leave after the first piece of text
        wait_for(lambda: running.runner.in_flight == 0)
        listed = http.get("/v1/conversations").json()["data"]
    assert [c["turn_count"] for c in listed] == [1]


def test_input_items_before_the_question_are_history_stored_as_turns(running) -> None:
    items = [
        {"role": "developer", "content": "IGNORED DEVELOPER TEXT"},
        {"role": "user", "content": DEMO[0]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Use the Helm chart.", "annotations": []}]},
        {"role": "user", "content": [{"type": "input_text", "text": DEMO[1]}]},
    ]
    with client(running) as openai_client:
        response = openai_client.responses.create(model="anaphora", input=items, instructions="Be brief.")
        completion = openai_client.chat.completions.create(
            model="anaphora",
            messages=[
                {"role": "user", "content": DEMO[0]},
                {"role": "assistant", "content": "Use the Helm chart."},
                {"role": "user", "content": DEMO[1]},
            ],
        )
        items_listed = list(openai_client.conversations.items.list(response.conversation.id, order="asc"))
    assert response.instructions == "Be brief."  # echoed; the service's system prompt applies
    assert extension(response)["trace"]["query"] == extension(completion)["trace"]["query"] != DEMO[1]
    assert [i.content[0].text for i in items_listed] == [DEMO[0], "Use the Helm chart.", DEMO[1], response.output_text]
    assert extension(response)["turn_index"] == 1 and response.previous_response_id.endswith("_0")


def test_the_retrieval_rewrite_never_reaches_the_streamed_text(running) -> None:
    rewrite = "kestrel zzqqx helm daemonset arm64"

    class Rewrites:
        calls_model = False

        async def run(self, question, history):
            return QueryPlan(query=rewrite, source="rewrite", status="ok")

    running.components.engine.replace_stage(QueryPlanner(Rewrites()))
    with client(running) as openai_client:
        events = list(openai_client.responses.create(model="anaphora", input="and on ARM?", stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas and rewrite not in deltas and rewrite not in events[-1].response.output_text
    assert extension(events[-1].response)["trace"]["query"] == rewrite


def test_a_model_failing_mid_stream_ends_with_response_failed_then_error(tmp_path) -> None:
    class FailsMidway(FakeChatModel):
        def stream(self, messages, options):
            return ChatStream(lambda usage: self._fail_midway())

        async def _fail_midway(self):
            yield "A first sentence. Then"
            raise ModelUnavailableError("the model server went away")

    settings = settings_for(tmp_path, answer_check="off")
    with serve(settings, components_for(settings, FailsMidway())) as running, client(running) as openai_client:
        events = list(openai_client.responses.create(model="anaphora", input=DEMO[0], stream=True))
    assert [e.type for e in events[-2:]] == ["response.failed", "error"]
    assert events[-2].response.status == "failed" and "unavailable" in events[-2].response.error.message
    assert events[-2].response.error.code == "model_unavailable" == events[-1].code and events[-1].param is None
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "A first sentence."
