"""Votes on answers over HTTP: on a turn and on a response id, one per answer (changeable), only the owner's, read
back with the conversation, erased with the user; the support link with refusals; the report for admins only."""

from __future__ import annotations

import httpx
import pytest

from tests.server_harness import bearer, components_for, serve, settings_for

pytestmark = pytest.mark.unit
SUPPORT = "https://support.example.com/new-ticket"
ANSWERED = "How do I install Kestrel on Kubernetes?"
REFUSED = "How do I configure the Zanzibar flux capacitor quorum?"


@pytest.fixture
def running(tmp_path, fake_model):
    # the hashing embedder's relevance floor, as in tests/unit/report: low enough to answer, high enough to refuse
    settings = settings_for(tmp_path, support_url=SUPPORT, similarity_threshold=0.2)
    with serve(settings, components_for(settings, fake_model)) as server:
        yield server


def admin(running) -> httpx.Client:
    return httpx.Client(base_url=running.url, headers=bearer("root", scope="admin"), timeout=30)


def ask(http: httpx.Client, conversation_id: str, question: str) -> dict:
    reply = http.post(f"/v1/conversations/{conversation_id}/messages", json={"content": question})
    assert reply.status_code == 200, reply.text
    return reply.json()


def turn_path(conversation_id: str, index: int) -> str:
    return f"/v1/conversations/{conversation_id}/turns/{index}/feedback"


def test_a_vote_round_trips_and_is_changeable(running) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations").json()["id"]
        ask(http, conversation, ANSWERED)
        up = http.put(turn_path(conversation, 0), json={"vote": "up"})
        assert up.status_code == 200, up.text
        body = up.json()
        assert body["object"] == "feedback" and body["vote"] == "up" and body["comment"] == ""
        assert body["response_id"] == f"resp_{conversation}_0" and body["turn_index"] == 0
        down = http.put(turn_path(conversation, 0), json={"vote": "down", "comment": "it skipped the Helm step"})
        assert down.json()["created_at"] == body["created_at"] and down.json()["vote"] == "down"
        [turn] = http.get(f"/v1/conversations/{conversation}").json()["turns"]  # the export holds the vote
        assert turn["feedback"]["vote"] == "down" and turn["feedback"]["comment"] == "it skipped the Helm step"
        withdrawn = http.delete(turn_path(conversation, 0))
        assert withdrawn.json() == {
            "object": "feedback.deleted",
            "conversation_id": conversation,
            "turn_index": 0,
            "deleted": True,
        }
        assert http.delete(turn_path(conversation, 0)).json()["deleted"] is False
        assert http.get(f"/v1/conversations/{conversation}").json()["turns"][0]["feedback"] is None


def test_a_vote_on_a_response_id(running) -> None:
    with running.client() as http:
        response = http.post("/v1/responses", json={"model": "anaphora", "input": ANSWERED}).json()
        voted = http.put(f"/v1/responses/{response['id']}/feedback", json={"vote": "down", "comment": "vague"})
        assert voted.status_code == 200, voted.text
        conversation = response["conversation"]["id"]
        assert voted.json()["conversation_id"] == conversation
        [turn] = http.get(f"/v1/conversations/{conversation}").json()["turns"]
        assert (turn["feedback"]["vote"], turn["feedback"]["comment"]) == ("down", "vague")
        assert http.delete(f"/v1/responses/{response['id']}/feedback").json()["deleted"] is True
        for missing in ("resp_nothere_0", "not-a-response", f"resp_{conversation}_7"):
            refused = http.put(f"/v1/responses/{missing}/feedback", json={"vote": "up"})
            assert refused.status_code == 404 and missing in refused.json()["error"]["message"]


def test_only_the_owner_votes_and_nothing_of_theirs_is_revealed(running) -> None:
    with running.client() as alice, running.client("bob") as bob:
        conversation = alice.post("/v1/conversations").json()["id"]
        ask(alice, conversation, ANSWERED)
        alice.put(turn_path(conversation, 0), json={"vote": "up", "comment": "alice's words"})
        for call in (
            bob.put(turn_path(conversation, 0), json={"vote": "down"}),
            bob.delete(turn_path(conversation, 0)),
            bob.put(f"/v1/responses/resp_{conversation}_0/feedback", json={"vote": "down"}),
        ):
            assert call.status_code == 404
            assert "alice" not in call.text
        assert alice.get(f"/v1/conversations/{conversation}").json()["turns"][0]["feedback"]["vote"] == "up"
        assert alice.put(turn_path(conversation, 3), json={"vote": "up"}).status_code == 404


@pytest.mark.parametrize(
    "body",
    [{"vote": "sideways"}, {}, {"vote": "up", "comment": "x" * 2001}, {"vote": "up", "extra": 1}, {"vote": True}],
)
def test_bad_votes_are_422_with_a_reason(running, body) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations").json()["id"]
        ask(http, conversation, ANSWERED)
        refused = http.put(turn_path(conversation, 0), json=body)
        assert refused.status_code == 422 and refused.json()["error"]["message"]


def test_votes_are_erased_with_the_user(running) -> None:
    with running.client() as alice, admin(running) as root:
        conversation = alice.post("/v1/conversations").json()["id"]
        ask(alice, conversation, ANSWERED)
        alice.put(turn_path(conversation, 0), json={"vote": "down", "comment": "alice-only-comment"})
        before = root.get("/v1/admin/report").json()
        assert [d["comment"] for d in before["thumbs_down"]] == ["alice-only-comment"]
        assert alice.delete("/v1/users/alice/data").status_code == 200
        after = root.get("/v1/admin/report")
        assert "alice-only-comment" not in after.text and ANSWERED not in after.text
        assert after.json()["turns"] == 0 and after.json()["votes"] == {"up": 0, "down": 0}


def test_refusals_carry_the_support_link(running) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations").json()["id"]
        refused = ask(http, conversation, REFUSED)
        assert refused["trace"]["abstained"], refused["answer"]
        assert refused["handoff"] == {"url": SUPPORT, "reason": "refused"}
        [turn] = http.get(f"/v1/conversations/{conversation}").json()["turns"]
        assert turn["handoff"] == {"url": SUPPORT, "reason": "refused"}
        stream = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": REFUSED}]})
        assert stream.json()["anaphora"]["handoff"]["reason"] == "refused"
        session = http.get("/v1/session").json()
        assert session["support_url"] == SUPPORT and session["admin"] is False


def test_the_report_is_for_administrators_only(running) -> None:
    with running.client() as alice, admin(running) as root:
        conversation = alice.post("/v1/conversations").json()["id"]
        ask(alice, conversation, REFUSED)
        refused = alice.get("/v1/admin/report")
        assert refused.status_code == 403 and REFUSED not in refused.text
        report = root.get("/v1/admin/report", params={"since": "1d"})
        assert report.status_code == 200
        assert [g["question"] for g in report.json()["gaps"]] == [REFUSED]
        csv = root.get("/v1/admin/report", params={"format": "csv", "since": "2000-01-01"})
        assert csv.headers["content-type"].startswith("text/csv")
        assert csv.text.splitlines()[0] == "section,name,count,refused,low_support,follow_ups,detail"
        assert any(line.startswith("gap,") for line in csv.text.splitlines())
        bad = root.get("/v1/admin/report", params={"since": "last tuesday"})
        assert bad.status_code == 400 and "since" in bad.json()["error"]["message"]
        backwards = root.get("/v1/admin/report", params={"since": "1d", "until": "2d"})
        assert backwards.status_code == 400
