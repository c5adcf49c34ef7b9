"""In drop mode the sentence the support check left out reaches the client nowhere (issue 51): not in the answer,
and not in the trace the JSON reply, the final stream event and the stored turn carry (what the page's "why" panel
shows); the trace keeps the verdict and the missing tokens."""

from __future__ import annotations

import json

import pytest

from anaphora import FakeChatModel
from tests.server_harness import components_for, serve, settings_for, sse_events

pytestmark = pytest.mark.unit

QUESTION = "Which image tags exist for arm64 on Kubernetes?"
ARM = "Architecture-specific tags also exist, `3.4.1-amd64` and `3.4.1-arm64`."
INVENTED = "Then run sudo systemctl start kestrel-host -n 128.04k to finish."


@pytest.fixture
def running(tmp_path):
    settings = settings_for(tmp_path, answer_check="drop")
    model = FakeChatModel(default=lambda messages: f"{ARM} {INVENTED}")
    with serve(settings, components_for(settings, model)) as server:
        yield server


def check_trace(trace: dict) -> None:
    dropped = [unit for unit in trace["support"] if not unit["kept"]]
    assert len(dropped) == 1, trace["support"]
    assert dropped[0]["text"] == "" and dropped[0]["verdict"] == "unsupported"
    assert "128.04k" in dropped[0]["missing"], "the missing tokens stay: they say why it was left out"
    assert any(unit["kept"] and "3.4.1-arm64" in unit["text"] for unit in trace["support"])


def test_the_dropped_sentence_is_in_no_reply_event_or_stored_trace(running) -> None:
    with running.client("alice") as http:
        reply = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}]})
        assert reply.status_code == 200, reply.text
        assert "systemctl" not in reply.text
        check_trace(reply.json()["anaphora"]["trace"])

        conversation = http.post("/v1/conversations").json()["id"]
        body = {"content": QUESTION, "stream": True}
        with http.stream("POST", f"/v1/conversations/{conversation}/messages", json=body) as streamed:
            events = sse_events(streamed)
        assert "systemctl" not in json.dumps(events)
        final = next(e for e in reversed(events) if isinstance(e, dict) and "anaphora" in e)
        check_trace(final["anaphora"]["trace"])

        stored = http.get(f"/v1/conversations/{conversation}")
        assert "systemctl" not in stored.text
        check_trace(stored.json()["turns"][0]["trace"])
