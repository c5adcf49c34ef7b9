"""The web page's server side: served at / with a strict policy, its files shipped in the package, nosniff on every
response, `web_ui = false` for an API-only service; and the rename route the page's conversation list uses."""

from __future__ import annotations

import re

import pytest

from anaphora.server.web import STATIC
from tests.server_harness import bearer, components_for, serve, settings_for

pytestmark = pytest.mark.unit
PAGE_BUDGET_BYTES = 100_000


@pytest.fixture
def running(tmp_path, fake_model):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, fake_model, ingest=False)) as server:
        yield server


def test_the_page_and_its_modules_are_served_with_the_policy(running) -> None:
    with running.client() as http:
        page = http.get("/", headers={})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        assert not re.search(r"<script(?![^>]*\bsrc=)|\son[a-z]+\s*=|<style|\sstyle\s*=", page.text)  # nothing inline
        script = http.get("/ui/app.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert script.headers["content-security-policy"] == policy
        assert http.get("/ui/missing.js").status_code == 404
        assert http.get("/ui/../settings.py").status_code == 404


def test_nosniff_is_on_api_responses_too(running) -> None:
    with running.client() as http:
        assert http.get("/healthz").headers["x-content-type-options"] == "nosniff"
        refused = http.get("/v1/conversations", headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401 and refused.headers["x-content-type-options"] == "nosniff"


def test_web_ui_off_leaves_the_service_api_only(tmp_path, fake_model) -> None:
    settings = settings_for(tmp_path, web_ui=False)
    with serve(settings, components_for(settings, fake_model, ingest=False)) as server, server.client() as http:
        assert http.get("/").status_code == 404
        assert http.get("/ui/app.js").status_code == 404
        assert http.get("/healthz").status_code == 200


def test_the_shipped_files_weigh_less_than_the_budget() -> None:
    files = [p for p in STATIC.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"index.html", "app.js", "app.css", "markdown.js"}
    assert sum(p.stat().st_size for p in files) <= PAGE_BUDGET_BYTES
    for source in files:  # the renderer builds nodes; no file may hand text to the HTML parser
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", text), (
            source
        )


def test_rename_is_scoped_to_the_owner(running) -> None:
    with running.client() as http:
        created = http.post("/v1/conversations", json={"title": "before"}).json()
        renamed = http.patch(f"/v1/conversations/{created['id']}", json={"title": "after"})
        assert renamed.status_code == 200 and renamed.json()["title"] == "after"
        assert http.get(f"/v1/conversations/{created['id']}").json()["title"] == "after"
        assert http.patch(f"/v1/conversations/{created['id']}", json={"title": ""}).status_code == 422
        other = http.patch(f"/v1/conversations/{created['id']}", json={"title": "x"}, headers=bearer("bob"))
        assert other.status_code == 404 and other.json()["error"]["type"] == "not_found_error"
    assert http.is_closed
