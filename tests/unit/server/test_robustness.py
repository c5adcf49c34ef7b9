"""Validation with clear 4xx bodies, error mapping at the edge, metrics, health, and `anaphora serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from anaphora import ConfigurationError, FakeChatModel, ModelNotFoundError, Settings
from anaphora.server.app import from_environment
from anaphora.server.serve import check, is_loopback
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"


@pytest.fixture(scope="module")
def model() -> FakeChatModel:
    return FakeChatModel()


@pytest.fixture(scope="module")
def running(tmp_path_factory, model):
    settings = settings_for(tmp_path_factory.mktemp("robust"), max_message_chars=100, max_request_bytes=4096)
    with serve(settings, components_for(settings, model)) as server:
        yield server


@pytest.fixture
def http(running):
    with running.client() as client:
        yield client


def user(content: str = QUESTION) -> dict:
    return {"role": "user", "content": content}


@pytest.mark.parametrize(
    ("body", "status", "kind", "says"),
    [
        ({"messages": []}, 422, "validation_error", "messages: should have at least 1 item"),
        ({"messages": [{"role": "tool", "content": "x"}]}, 422, "validation_error", "messages[0].role"),
        (
            {"messages": [{"role": "user"}, {"role": "wizard", "content": "x"}]},
            422,
            "validation_error",
            "messages[1].role",
        ),
        ({"messages": "hello"}, 422, "validation_error", "messages: should be a valid list"),
        ({"messages": [user()], "stream": "yes"}, 422, "validation_error", "stream"),
        ({"messages": [user()], "temperature": 7}, 422, "validation_error", "temperature"),
        ({"messages": [user()], "max_tokens": "many"}, 422, "validation_error", "max_tokens"),
        ({"messages": [user()], "n": 2}, 422, "validation_error", "n:"),
        (
            {"messages": [{"role": "user", "content": 42}]},
            422,
            "validation_error",
            "messages[0].content: should be a string or a list of text parts",
        ),
        ({"messages": [user(), {"role": "assistant", "content": "x"}]}, 400, "invalid_request_error", "last message"),
        ({"messages": [user(), {"role": "system", "content": "x"}]}, 400, "invalid_request_error", "not the system"),
        ({"messages": [user("x" * 101)]}, 400, "invalid_request_error", "messages[0] has 101 characters"),
        ({"messages": [user("x" * 101), user()]}, 400, "invalid_request_error", "messages[0] has 101 characters"),
        ({"messages": [user("   ")]}, 400, "invalid_request_error", "the question is empty"),
        ({"messages": [user("   ")], "stream": True}, 400, "invalid_request_error", "the question is empty"),
        ({}, 422, "validation_error", "messages: is required"),
    ],
)
def test_bad_chat_requests_get_clear_4xx_bodies(http, body, status, kind, says) -> None:
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "param", "code", "hint"}
    assert error["type"] == kind and says in error["message"], error
    assert error["hint"]


def test_unknown_fields_are_ignored_like_openai_extras(http) -> None:
    body = {"messages": [user()], "model": "x", "temperature": 0.5, "max_tokens": 10, "user": "u1", "seed": 3}
    assert http.post("/v1/chat/completions", json=body).status_code == 200


@pytest.mark.parametrize(
    ("content", "headers", "status", "kind"),
    [
        (b'{"messages": [', {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"messages": []}', {"content-type": "text/plain"}, 400, "invalid_request_error"),
        (b"", {}, 400, "invalid_request_error"),
        (b"[1, 2]", {"content-type": "application/json"}, 422, "validation_error"),
        (b"x" * 5000, {"content-type": "application/json"}, 413, "request_too_large"),
    ],
)
def test_malformed_bodies(http, content, headers, status, kind) -> None:
    response = http.post("/v1/chat/completions", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == kind


def test_a_chunked_body_over_the_limit_is_413(http) -> None:
    def chunks():
        for _ in range(10):
            yield b"x" * 1000

    response = http.post("/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["type"] == "request_too_large"


def test_conversation_message_validation(http) -> None:
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    url = f"/v1/conversations/{conversation}/messages"
    assert http.post(url, json={"content": "x" * 101}).status_code == 400
    assert http.post(url, json={"content": 3}).status_code == 422
    assert http.post(url, json={"text": "hi"}).status_code == 422
    assert http.post(url, json={"content": "  "}).json()["error"]["message"] == "the question is empty"
    assert http.post("/v1/conversations", json={"title": "t" * 201}).status_code == 422
    assert http.get(f"/v1/conversations/{conversation}").json()["turn_count"] == 0  # nothing stored by bad input


def test_unknown_routes_and_methods_use_the_error_shape(http) -> None:
    missing = http.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    wrong = http.put("/v1/conversations")
    assert wrong.status_code == 405 and "error" in wrong.json()


def test_internal_errors_are_500_without_internals(http, model, caplog) -> None:
    model.enqueue(RuntimeError("password=hunter2 at /srv/secret/path"))
    response = http.post("/v1/chat/completions", json={"messages": [user()]})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "server_error" and "reference" in error["message"]
    assert "hunter2" not in response.text and "/srv/secret" not in response.text
    reference = error["message"].split("reference ")[1].rstrip(")")
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info  # the server log has the details, once, under the reference


def test_model_not_found_is_500_without_paths_and_stream_errors_too(http, model) -> None:
    model.enqueue(ModelNotFoundError("no GGUF at /models/secret.gguf", hint="set ANAPHORA_CHAT_MODEL"))
    response = http.post("/v1/chat/completions", json={"messages": [user()], "stream": True})
    assert response.status_code == 500 and "/models/secret.gguf" not in response.text


def test_configuration_errors_are_500_with_their_hint(http, model) -> None:
    model.enqueue(ConfigurationError("the reranker is misconfigured", hint="set ANAPHORA_RERANKER"))
    response = http.post("/v1/chat/completions", json={"messages": [user()]})
    assert response.status_code == 500
    assert response.json()["error"] == {
        "type": "configuration_error",
        "message": "the reranker is misconfigured",
        "param": None,
        "code": "configuration_error",
        "hint": "set ANAPHORA_RERANKER",
    }


def test_healthz_readyz_metrics(http, running, monkeypatch) -> None:
    assert http.post("/v1/chat/completions", json={"messages": [user()]}).status_code == 200
    with httpx.Client(base_url=running.url) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"] == {"store": "ok"}
        metrics = anonymous.get("/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        for expected in (
            "anaphora_turns_total",
            "anaphora_stage_seconds_bucket",
            "anaphora_routes_total",
            'anaphora_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}',
            'anaphora_http_request_seconds_bucket{le="0.005",method="POST",route="/v1/chat/completions"}',
            "anaphora_http_turns_in_flight 0.0",
        ):
            assert expected in text, expected

        def broken(*args, **kwargs):
            raise OSError("disk on fire")

        monkeypatch.setattr(running.components.database, "query", broken)
        not_ready = anonymous.get("/readyz")
        assert not_ready.status_code == 503 and not_ready.json()["checks"]["store"] == "error: OSError"
        assert anonymous.get("/healthz").status_code == 200


def test_routes_are_labelled_by_template_not_by_id(http, running) -> None:
    http.get("/v1/conversations/abc123")
    http.get("/v1/nothing/here")
    text = httpx.get(f"{running.url}/metrics").text
    assert 'route="/v1/conversations/{conversation_id}",status="404"' in text
    assert "abc123" not in text and 'route="unmatched"' in text


def test_an_app_without_components_builds_and_closes_its_own(tmp_path, monkeypatch) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, app_builds=True) as running, running.client() as http:
        conversation = http.post("/v1/conversations", json={"title": "kept"}).json()["id"]
        service = running.app.state.service
        assert service.owns_components
        running.stop()
        assert not hasattr(running.app.state, "service")  # the running service ended with the app
        with pytest.raises(sqlite3.ProgrammingError):  # its components were closed at shutdown
            service.components.database.query("SELECT 1")
    reopened = components_for(settings, ingest=False)
    try:
        assert asyncio.run(reopened.conversations.get("alice", conversation)).title == "kept"
    finally:
        reopened.database.close()
    monkeypatch.setenv("ANAPHORA_AUTH", "none")
    monkeypatch.setenv("ANAPHORA_DATA_DIR", str(tmp_path / "env"))
    assert isinstance(from_environment(), FastAPI)


# --- anaphora serve ---------------------------------------------------------------------------------------------


def test_serve_checks(tmp_path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("example.org")
    base = {"data_dir": tmp_path, "jwt_secret": "x" * 32}
    check(Settings(**base, auth="none", server_host="127.0.0.1"))
    check(Settings(**base, auth="none", server_host="0.0.0.0"), force_insecure=True)
    check(Settings(**base, auth="jwt", server_host="0.0.0.0"))
    with pytest.raises(ConfigurationError, match="without authentication") as refused:
        check(Settings(**base, auth="none", server_host="0.0.0.0"))
    assert "--force-insecure" in refused.value.hint
    with pytest.raises(ConfigurationError, match="this server's own address"):
        check(Settings(**base, chat_model="openai:m", openai_base_url="http://localhost:8000/v1", server_port=8000))
    check(Settings(**base, chat_model="openai:m", openai_base_url="http://localhost:8001/v1", server_port=8000))


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None, **kwargs):
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "anaphora", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=tmp_path,
        **kwargs,
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["serve", "--host", "0.0.0.0"], {"ANAPHORA_AUTH": "none"}, "--force-insecure"),
        (["serve"], {"ANAPHORA_AUTH": "jwt"}, "no key is configured"),
        (["serve"], {"ANAPHORA_JWT_SECRET": "short"}, "shorter than 32 bytes"),
        (
            ["serve"],
            {"ANAPHORA_AUTH": "none", "ANAPHORA_EMBEDDER": "sentence-transformers:/nonexistent"},
            "no sentence-transformers model",
        ),
    ],
)
def test_serve_refuses_unsafe_setups_with_a_fix(tmp_path, args, env, says) -> None:
    process = cli(tmp_path, *args, env=env)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "error:" in stderr and says in stderr and "fix:" in stderr


def test_serve_runs_and_stops_on_sigint(tmp_path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = cli(tmp_path, "serve", "--port", str(port), env={"ANAPHORA_AUTH": "none"})
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "anaphora serve did not come up"
            time.sleep(0.1)
        created = httpx.post(f"http://127.0.0.1:{port}/v1/conversations", json={"title": "cli"})
        assert created.status_code == 201
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_huge_pagination_offset_is_a_4xx_not_a_crash(tmp_path) -> None:
    # found by the schemathesis run: an offset beyond SQLite's 64-bit integers used to raise OverflowError (500)
    with serve(settings_for(tmp_path)) as running, running.client("alice") as alice:
        response = alice.get("/v1/conversations", params={"offset": 2**70})
        assert response.status_code == 422
