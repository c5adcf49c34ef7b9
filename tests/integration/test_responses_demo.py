"""The demo's first five turns through the Responses API with the embedded defaults, over a live server and the
official openai client: a previous_response_id chain retrieves what each follow-up means, as the library does
(tests/integration/test_demo_followups.py), and so does a conversation= chain streamed."""

from __future__ import annotations

import json

import openai
import pytest

from anaphora import Settings
from anaphora.app import build_components
from tests.conftest import DEMO_SCRIPT, SAMPLE_DOCS
from tests.server_harness import SECRET, serve, token

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TURNS = json.loads(DEMO_SCRIPT.read_text())["turns"][:5]


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("responses-demo"), answer_max_tokens=48, jwt_secret=SECRET, memory="off"
    )
    components = build_components(settings)
    components.ingestor.run([SAMPLE_DOCS])
    with serve(settings, components) as server:
        yield server


def sections(response) -> set[tuple[str, str]]:
    retrieved = (response.model_extra or {})["anaphora"]["trace"]["retrieved"]
    return {(p["source"], p["heading"].split(" > ")[-1]) for p in retrieved}


def wanted(turn) -> set[tuple[str, str]]:
    return {(e["source"], e["heading"]) for e in turn["expect"]}


def test_a_five_turn_previous_response_id_chain_retrieves_what_each_follow_up_means(running) -> None:
    with openai.OpenAI(base_url=f"{running.url}/v1", api_key=token("alice"), max_retries=0, timeout=300) as client:
        previous, replies = None, []
        for turn in TURNS:
            reply = client.responses.create(model="anaphora", input=turn["user"], previous_response_id=previous)
            replies.append(reply)
            previous = reply.id
    for turn, reply in zip(TURNS, replies, strict=True):
        assert wanted(turn) & sections(reply), (turn["user"], sections(reply))
        assert reply.output_text and reply.output[0].content[0].annotations
    assert [r.previous_response_id for r in replies[1:]] == [r.id for r in replies[:-1]]


def test_the_arm_follow_up_streamed_in_a_conversation_retrieves_the_arm_section(running) -> None:
    with openai.OpenAI(base_url=f"{running.url}/v1", api_key=token("bob"), max_retries=0, timeout=300) as client:
        conversation = client.conversations.create()
        client.responses.create(model="anaphora", input=TURNS[0]["user"], conversation=conversation.id)
        events = list(
            client.responses.create(model="anaphora", input=TURNS[1]["user"], conversation=conversation.id, stream=True)
        )
    final = events[-1]
    assert final.type == "response.completed" and final.response.usage.output_tokens > 0
    assert wanted(TURNS[1]) & sections(final.response)
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == final.response.output_text
    query = (final.response.model_extra or {})["anaphora"]["trace"]["query"]
    assert query != TURNS[1]["user"] and query not in streamed  # rewritten, and the rewrite stays in the trace
