"""Public mode (issue 49, item 2): anonymous visitor sessions, the origin allow-list, isolation of visitors over
every route, the routes closed to them, their limits (429 with the reason), memory off, and tokens kept out of
URLs and logs."""

from __future__ import annotations

import logging
import re
import time

import httpx
import pytest

from anaphora.errors import AuthError, ConfigurationError
from anaphora.server.serve import check_workers
from anaphora.server.visitors import VisitorTokens
from anaphora.settings import PublicSettings, Settings
from tests.server_harness import bearer, serve, settings_for

pytestmark = pytest.mark.unit
SITE = "https://docs.example.com"
OTHER_SITE = "https://blog.example.com"
EVIL = "https://evil.example"
PUBLIC = {"public_mode": True, "public_origins": [SITE + "/", OTHER_SITE], "visitor_secret": "v" * 40}


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    settings = settings_for(tmp_path_factory.mktemp("public"), **PUBLIC, visitor_turns_per_minute=1000)
    with serve(settings) as server:
        yield server


def visitor(running, site: str = SITE) -> httpx.Client:
    """A client holding a new visitor session for ``site``."""
    with httpx.Client(base_url=running.url, timeout=30) as anonymous:
        issued = anonymous.post("/v1/visitor/session", json={"site": site})
    assert issued.status_code == 200, issued.text
    assert issued.headers["cache-control"] == "no-store"
    token = issued.json()["token"]
    assert token not in str(issued.headers) and token not in str(issued.url)
    return httpx.Client(base_url=running.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def ask(client: httpx.Client, conversation_id: str, question: str = "How do I install Kestrel?") -> dict:
    answered = client.post(f"/v1/conversations/{conversation_id}/messages", json={"content": question})
    assert answered.status_code == 200, answered.text
    return answered.json()


def test_public_mode_is_off_by_default(tmp_path) -> None:
    assert Settings().public.public_mode is False
    with serve(settings_for(tmp_path)) as off, httpx.Client(base_url=off.url) as anonymous:
        assert anonymous.post("/v1/visitor/session", json={}).status_code == 404
        assert anonymous.get("/widget.js").status_code == 404
        assert anonymous.get("/widget").status_code == 404
        made = VisitorTokens(PublicSettings(visitor_secret="v" * 40)).issue(SITE).token  # the key of another set-up
        refused = anonymous.get("/v1/conversations", headers={"Authorization": f"Bearer {made}"})
        assert refused.status_code == 401  # not a visitor token here: a malformed JWT


def test_an_allow_list_entry_must_be_one_origin() -> None:
    assert PublicSettings(public_origins=["HTTPS://Docs.Example.com/"]).public_origins == [SITE]
    for bad in ("*", "docs.example.com", "https://docs.example.com/guide", "ftp://docs.example.com"):
        with pytest.raises(ValueError, match="is not a web origin"):
            PublicSettings(public_origins=[bad])


def test_a_visitor_session_is_signed_short_lived_and_its_own_user(running) -> None:
    with visitor(running) as client:
        session = client.get("/v1/session").json()
        assert session["user_id"].startswith("visitor:")
        renewed = client.post("/v1/visitor/session", json={}).json()  # sent with the token: the same visitor
        assert renewed["visitor_id"] == session["user_id"] and renewed["site"] == SITE
    tokens = VisitorTokens(PublicSettings(visitor_secret="v" * 40, visitor_session_ttl_s=60))
    token = tokens.issue(SITE).token
    assert tokens.verify(token).visitor and tokens.verify(token).site == SITE
    later = VisitorTokens(PublicSettings(visitor_secret="v" * 40), clock=lambda: time.time() + 61)
    with pytest.raises(AuthError, match="expired"):
        later.verify(token)
    payload = token.split(".")[1]
    forged = token.replace(payload, payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB"))
    with pytest.raises(AuthError, match="signature"):
        tokens.verify(forged)
    with pytest.raises(AuthError, match="signature"):
        VisitorTokens(PublicSettings(visitor_secret="w" * 40)).verify(token)


def test_sites_and_origins_not_in_the_list_are_refused(running) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as anonymous:
        refused = anonymous.post("/v1/visitor/session", json={"site": EVIL})
        assert refused.status_code == 403 and "may not embed" in refused.json()["error"]["message"]
        from_evil = anonymous.post("/v1/visitor/session", json={"site": SITE}, headers={"Origin": EVIL})
        assert from_evil.status_code == 403
        assert from_evil.json()["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in from_evil.headers
        preflight = {"Origin": EVIL, "Access-Control-Request-Method": "POST"}
        assert anonymous.options("/v1/conversations", headers=preflight).status_code == 403
        proxied = {"Origin": "https://assistant.example.com", "Sec-Fetch-Site": "same-origin"}  # a Host-rewriting proxy
        assert anonymous.get("/v1/conversations", headers=proxied).status_code == 401  # passed to the credentials
        by_origin = anonymous.post("/v1/visitor/session", headers={"Origin": OTHER_SITE})  # no body: the Origin's
        assert by_origin.status_code == 200 and by_origin.json()["site"] == OTHER_SITE
        assert by_origin.headers["access-control-allow-origin"] == OTHER_SITE


def test_an_allowed_site_gets_cors(running) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as anonymous:
        preflight = anonymous.options(
            "/v1/conversations",
            headers={
                "Origin": SITE,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == SITE
        assert "Authorization" in preflight.headers["access-control-allow-headers"]
        assert "access-control-allow-credentials" not in preflight.headers  # a header token, never cookies
    with visitor(running) as client:
        listed = client.get("/v1/conversations", headers={"Origin": SITE})
        assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == SITE
        assert "Retry-After" in listed.headers["access-control-expose-headers"]


def route_calls(app, conversation_id: str, response_id: str) -> list[tuple[str, str]]:
    """(method, path) of every API operation that names a conversation or a response, with the given ids."""
    calls = []
    for template, operations in app.openapi()["paths"].items():
        if re.search(r"\{(conversation_id|response_id)\}", template):
            path = (
                template.replace("{conversation_id}", conversation_id)
                .replace("{response_id}", response_id)
                .replace("{index}", "0")
            )
            calls += [(method.upper(), path) for method in sorted(operations)]
    return calls


BODIES = {
    "messages": {"content": "And on ARM?"},
    "feedback": {"vote": "down"},
    "items": {"items": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
}


def test_a_visitor_cannot_read_continue_or_delete_another_visitors_conversation(running) -> None:
    with visitor(running) as alice, visitor(running, OTHER_SITE) as mallory:
        conversation = alice.post("/v1/conversations", json={"title": "mine"}).json()["id"]
        ask(alice, conversation)
        response = alice.post("/v1/responses", json={"input": "How do I install Kestrel?"}).json()["id"]
        calls = route_calls(running.app, conversation, response)
        assert len(calls) >= 8, calls  # read, rename, delete, messages, items x2, responses x3
        for method, path in calls:
            body = next((b for key, b in BODIES.items() if path.endswith(key)), {"title": "stolen"})
            answer = mallory.request(method, path, json=body if method in ("POST", "PATCH", "PUT") else None)
            assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
        chained = mallory.post("/v1/responses", json={"input": "and on ARM?", "previous_response_id": response})
        assert chained.status_code == 404
        into = mallory.post("/v1/responses", json={"input": "and on ARM?", "conversation": conversation})
        assert into.status_code == 404
        assert mallory.get("/v1/conversations").json()["data"] == []
        mine = alice.get(f"/v1/conversations/{conversation}").json()
        assert mine["title"] == "mine" and len(mine["turns"]) == 1
        assert alice.get(f"/v1/responses/{response}").status_code == 200
        alice_id = alice.get("/v1/session").json()["user_id"]
        assert mallory.delete(f"/v1/users/{alice_id}/data").status_code == 403
        assert alice.get(f"/v1/conversations/{conversation}").status_code == 200


def test_uploads_documents_and_memory_are_closed_to_visitors(running) -> None:
    with visitor(running) as client:
        for method, path in (
            ("GET", "/v1/documents"),
            ("POST", "/v1/documents"),
            ("DELETE", "/v1/documents/guide.md"),
            ("GET", "/v1/jobs/some-job"),
            ("GET", "/v1/memories"),
            ("DELETE", "/v1/memories"),
            ("DELETE", "/v1/memories/some-memory"),
        ):
            refused = client.request(method, path, json={"path": "/etc"} if method == "POST" else None)
            assert refused.status_code == 403, (method, path, refused.text)
            assert "closed to anonymous visitors" in refused.json()["error"]["message"]


def test_a_signed_in_user_cannot_pose_as_a_visitor(running) -> None:
    with httpx.Client(base_url=running.url, headers=bearer("visitor:0123"), timeout=30) as poser:
        refused = poser.get("/v1/conversations")
        assert refused.status_code == 401 and "reserved for anonymous visitors" in refused.json()["error"]["message"]
    with running.client("alice") as alice:
        assert alice.get("/v1/conversations").status_code == 200  # users with a JWT work as before


def test_long_term_memory_is_off_for_visitors_unless_the_operator_turns_it_on(tmp_path) -> None:
    remembered = {}
    for visitor_memory in (True, False):  # on first: it shows how long a memory write takes here
        settings = settings_for(tmp_path / str(visitor_memory), **PUBLIC, visitor_memory=visitor_memory)
        with serve(settings) as server, visitor(server) as client:
            conversation = client.post("/v1/conversations", json={}).json()["id"]
            ask(client, conversation, "I run Kestrel on a Raspberry Pi. How do I install it?")
            user_id = client.get("/v1/session").json()["user_id"]
            deadline = time.monotonic() + (10 if visitor_memory else 2)
            while not (items := memories(server, user_id)) and time.monotonic() < deadline:
                time.sleep(0.1)  # the memory write runs after the answer, in the background
            remembered[visitor_memory] = items
    assert remembered[True], "with visitor_memory on, the visitor's turn is remembered"
    assert remembered[False] == 0, "with visitor_memory off (the default), nothing is"


def memories(server, user_id: str) -> int:
    """How many long-term memory items the user has."""
    return server.components.database.query("SELECT COUNT(*) FROM memory_items WHERE user_id = ?", (user_id,))[0][0]


def test_limits_over_http_answer_429_with_a_reason_and_retry_after(tmp_path) -> None:
    settings = settings_for(tmp_path, **PUBLIC, visitor_turns_per_minute=2, public_daily_turns=3)
    with serve(settings) as server, visitor(server) as first, visitor(server) as second:
        conversation = first.post("/v1/conversations", json={}).json()["id"]
        ask(first, conversation)
        ask(first, conversation, "And on ARM?")
        limited = first.post(f"/v1/conversations/{conversation}/messages", json={"content": "And on RISC-V?"})
        assert limited.status_code == 429
        error = limited.json()["error"]
        assert error["code"] == "visitor_rate_limit" and "questions in the last minute" in error["message"]
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert len(first.get(f"/v1/conversations/{conversation}").json()["turns"]) == 2  # nothing lost
        stateless = {"messages": [{"role": "user", "content": "How do I install Kestrel?"}]}
        assert second.post("/v1/chat/completions", json=stateless).status_code == 200
        capped = second.post("/v1/chat/completions", json=stateless)
        assert capped.status_code == 429 and capped.json()["error"]["code"] == "daily_cap_reached"
        assert "public questions for today" in capped.json()["error"]["message"]
        with server.client("alice") as alice:  # signed-in users are not counted against the public limits
            assert alice.post("/v1/chat/completions", json=stateless).status_code == 200


def test_the_visitor_token_is_never_logged(running, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    with visitor(running) as client:
        token = client.headers["authorization"].removeprefix("Bearer ")
        conversation = client.post("/v1/conversations", json={}).json()["id"]
        ask(client, conversation)
        client.get("/v1/conversations/nope")
        client.get("/v1/memories")
    assert caplog.records, "nothing was logged: the check would be empty"
    assert all(token not in record.getMessage() and token not in str(vars(record)) for record in caplog.records)


def test_the_widget_is_served_with_its_framing_policy(running) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as anonymous:
        loader = anonymous.get("/widget.js")
        assert loader.status_code == 200 and loader.headers["content-type"].startswith("text/javascript")
        assert loader.headers["cross-origin-resource-policy"] == "cross-origin"
        frame = anonymous.get("/widget")
        csp = frame.headers["content-security-policy"]
        assert f"frame-ancestors 'self' {SITE} {OTHER_SITE}" in csp and "script-src 'self'" in csp
        assert "x-frame-options" not in frame.headers
        assert anonymous.get("/ui/widget/frame.js").status_code == 200
        assert anonymous.get("/").headers["x-frame-options"] == "DENY"  # the page at / stays unframeable


def test_several_workers_need_a_shared_visitor_secret(tmp_path) -> None:
    shared = {"session_store": "redis", "turn_lock": "redis", "data_dir": tmp_path}
    with pytest.raises(ConfigurationError, match="visitor_secret is empty"):
        check_workers(Settings(public_mode=True, **shared), 2)
    check_workers(Settings(public_mode=True, visitor_secret="v" * 40, **shared), 2)
    check_workers(Settings(public_mode=True, data_dir=tmp_path), 1)
