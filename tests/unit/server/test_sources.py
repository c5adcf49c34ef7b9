"""Published URLs over HTTP: with a base URL, the official openai client sees ``url_citation`` annotations on a
Responses answer and Chat Completions carries the URLs in its ``anaphora`` field; the sources API lists the folder
with its last sync and its pages (administrators only)."""

from __future__ import annotations

import httpx
import pytest

from anaphora.app import sources_of
from tests.conftest import SAMPLE_DOCS
from tests.server_harness import bearer, components_for, serve, settings_for
from tests.unit.server.test_openai import client, extension

pytestmark = pytest.mark.unit
BASE = "https://docs.example.com/kestrel/"
QUESTION = "What are the prerequisites for installing Kestrel on Kubernetes?"


@pytest.fixture
def running(tmp_path, fake_model):
    settings = settings_for(tmp_path)
    components = components_for(settings, fake_model, ingest=False)
    report = components.ingestor.run([SAMPLE_DOCS])
    sources_of(components).record_folders([SAMPLE_DOCS], report, base_url=BASE, generator="mkdocs")
    with serve(settings, components) as server:
        yield server


def test_responses_carry_url_citations_the_openai_client_reads(running) -> None:
    with client(running) as openai_client:
        response = openai_client.responses.create(model="anaphora", input=QUESTION)
    annotations = response.output[0].content[0].annotations
    urls = [a for a in annotations if a.type == "url_citation"]
    files = [a for a in annotations if a.type == "file_citation"]
    assert urls and len(urls) == len(files)
    for link in urls:
        assert link.url.startswith(BASE) and link.title
        assert 0 <= link.start_index <= link.end_index <= len(response.output_text)
    assert {c["url"] for c in extension(response)["citations"]} == {a.url for a in urls}


def test_chat_completions_carry_the_urls_in_the_extension(running) -> None:
    with client(running) as openai_client:
        reply = openai_client.chat.completions.create(
            model="anaphora", messages=[{"role": "user", "content": QUESTION}]
        )
    citations = extension(reply)["citations"]
    assert citations and all(c["url"].startswith(BASE) for c in citations)
    for citation in citations:  # a section's passage opens its heading, the page's introduction the page
        assert ("#" in citation["url"]) == (" > " in citation["heading"]), citation


def test_the_sources_api_lists_the_folder_and_its_pages_for_admins(running) -> None:
    with httpx.Client(base_url=running.url, headers=bearer("root", scope="admin"), timeout=30) as http:
        listed = http.get("/v1/sources").json()["data"]
        [folder] = listed
        assert folder["kind"] == "folder" and folder["base_url"] == BASE and folder["generator"] == "mkdocs"
        assert folder["synced_at"] and folder["pages"] > 0 and folder["last_report"]["added"] > 0
        pages = http.get(f"/v1/sources/{folder['id']}/pages").json()["data"]
        assert len(pages) == folder["pages"] and all(p["url"].startswith(BASE) for p in pages)
        assert http.get("/v1/sources/999/pages").status_code == 404
    with httpx.Client(base_url=running.url, headers=bearer("alice"), timeout=30) as http:
        assert http.get("/v1/sources").status_code == 403
