"""HEAD wherever GET works, and the API docs pages off by default (issue 25's probe: HEAD on / and /healthz got
405; /docs and /redoc loaded Swagger UI and ReDoc from a CDN onto the service's origin)."""

from __future__ import annotations

import httpx
import pytest

from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


@pytest.fixture
def running(tmp_path):
    settings = settings_for(tmp_path, auth="none")
    with serve(settings, components_for(settings, ingest=False)) as server:
        yield server


@pytest.mark.parametrize("path", ["/", "/healthz", "/readyz", "/openapi.json", "/ui/app.css", "/v1/conversations"])
def test_head_answers_like_get_without_a_body(running, path: str) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as http:
        got, head = http.get(path), http.head(path)
    assert got.status_code == 200 and head.status_code == 200, (got.text, head.text)
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers.get("content-length") == got.headers.get("content-length")


def test_head_where_no_get_is_still_405_with_allow(running) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as http:
        response = http.head("/v1/chat/completions")
    assert response.status_code == 405 and "POST" in response.headers["allow"]


def test_the_api_docs_pages_are_off_by_default_and_can_be_turned_on(running, tmp_path) -> None:
    with httpx.Client(base_url=running.url, timeout=30) as http:
        assert http.get("/docs").status_code == 404 and http.get("/redoc").status_code == 404
        assert http.get("/openapi.json").status_code == 200
    settings = settings_for(tmp_path / "on", auth="none", api_docs=True)
    with serve(settings, components_for(settings, ingest=False)) as on, httpx.Client(base_url=on.url) as http:
        assert http.get("/docs").status_code == 200 and "swagger" in http.get("/docs").text.lower()
        assert http.get("/redoc").status_code == 200
