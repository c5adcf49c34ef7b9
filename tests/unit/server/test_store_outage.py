"""A store outage (issue 16, defect 8): Redis or PostgreSQL down used to give every /v1 request an opaque
`500 server_error`; now 503 with Retry-After and the store error's message and hint. Readiness reports it, and
the service recovers without a restart."""

from __future__ import annotations

import socket

import pytest

from anaphora.errors import StoreError
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


def closed_port() -> int:
    with socket.socket() as probe:  # bound then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_store_503(response) -> dict:
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    error = response.json()["error"]
    assert error["type"] == "store_unavailable_error" and error["hint"], error
    return error


def test_a_redis_conversation_store_outage_is_503_with_retry_after(tmp_path) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    settings = settings_for(tmp_path, conversation_store="redis", redis_url=url)
    with serve(settings, components_for(settings, ingest=False)) as running, running.client() as http:
        error = assert_store_503(http.post("/v1/conversations", json={}))
        assert "cannot reach the Redis store" in error["message"] and "ANAPHORA_REDIS_URL" in error["hint"]
        assert_store_503(http.get("/v1/conversations"))
        assert http.get(f"{running.url}/readyz").status_code == 503


def test_a_redis_session_store_outage_is_503_too(tmp_path) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    settings = settings_for(tmp_path, session_store="redis", redis_url=url)
    with serve(settings, components_for(settings, ingest=False)) as running, running.client() as http:
        assert_store_503(http.get("/v1/conversations"))


def test_any_store_error_during_a_request_is_503_and_the_service_recovers(tmp_path, monkeypatch) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, ingest=False)) as running, running.client() as http:
        store = running.components.conversations
        working = store.list

        async def down(*args, **kwargs):
            raise StoreError("cannot connect to the PostgreSQL store: connection refused", hint="check the server")

        monkeypatch.setattr(store, "list", down)
        error = assert_store_503(http.get("/v1/conversations"))
        assert error == {
            "type": "store_unavailable_error",
            "message": "cannot connect to the PostgreSQL store: connection refused",
            "param": None,
            "code": "store_unavailable",
            "hint": "check the server",
        }
        monkeypatch.setattr(store, "list", working)
        assert http.get("/v1/conversations").status_code == 200
