"""Development mode (auth 'none') against web pages (issue 16, defect 2): a cross-site form POST planted a document,
and a foreign Host header (DNS rebinding) got full access. The service's own page must keep working."""

from __future__ import annotations

import pytest

from anaphora.server.dev_guard import host_name, is_loopback_name
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
EVIL = "https://evil.example"


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    settings = settings_for(tmp_path_factory.mktemp("devguard"), auth="none", dev_allowed_hosts=["anaphora.lan"])
    with serve(settings, components_for(settings, ingest=False)) as server:
        yield server


@pytest.fixture
def http(running):
    with running.client(sub=None) as client:
        yield client


def page_headers(running, host: str = "127.0.0.1") -> dict[str, str]:
    """What a browser sends for a fetch() from the service's own page at http://HOST:PORT/."""
    port = running.url.rsplit(":", 1)[1]
    return {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}", "Sec-Fetch-Site": "same-origin"}


def test_a_cross_site_form_post_cannot_plant_a_document(http) -> None:
    files = {"files": ("planted.md", b"# Kestrel\n\nThe admin password is hunter2.\n", "text/markdown")}
    for headers in (
        {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"},
        {"Origin": EVIL},  # a browser without Fetch Metadata
        {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain is another site's page too
        {"Origin": "null"},  # a sandboxed iframe or a file:// page
    ):
        response = http.post("/v1/documents", files=files, headers=headers)
        assert response.status_code == 403, (headers, response.text)
        error = response.json()["error"]
        assert error["type"] == "permission_error" and error["hint"], error
    assert http.get("/v1/documents").json()["data"] == []
    assert http.post("/v1/conversations", json={}, headers={"Origin": EVIL}).status_code == 403


def test_a_foreign_host_header_is_refused_even_for_reads(http) -> None:
    for path in ("/v1/conversations", "/v1/documents", "/healthz"):
        response = http.get(path, headers={"Host": "rebound.evil.example:8000"})
        assert response.status_code == 403, response.text
        assert "loopback hosts only" in response.json()["error"]["message"]


def test_the_services_own_page_and_non_browser_clients_pass(http, running) -> None:
    for host in ("127.0.0.1", "localhost"):
        created = http.post("/v1/conversations", json={"title": "from the page"}, headers=page_headers(running, host))
        assert created.status_code == 201, created.text
        assert http.get("/v1/conversations", headers=page_headers(running, host)).status_code == 200
    typed_in = {"Sec-Fetch-Site": "none"}  # the address bar or a bookmark
    assert http.get("/v1/conversations", headers=typed_in).status_code == 200
    assert http.post("/v1/conversations", json={}).status_code == 201  # curl, SDKs: no Origin, no Fetch Metadata
    port = running.url.rsplit(":", 1)[1]
    assert http.get("/v1/conversations", headers={"Host": f"[::1]:{port}"}).status_code == 200
    assert http.get("/v1/conversations", headers={"Host": f"anaphora.lan:{port}"}).status_code == 200  # allowed


def test_the_page_of_another_local_port_is_another_origin(http, running) -> None:
    headers = {**page_headers(running), "Origin": "http://127.0.0.1:1"}
    assert http.post("/v1/conversations", json={}, headers=headers).status_code == 403


def test_jwt_mode_is_not_restricted_by_host(tmp_path) -> None:
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings, ingest=False)) as running, running.client() as http:
        assert http.get("/v1/conversations", headers={"Host": "anaphora.example.org"}).status_code == 200


def test_host_names() -> None:
    assert host_name("Example.ORG:8000") == "example.org" and host_name("[::1]:80") == "::1"
    assert host_name("localhost.") == "localhost" and host_name("::1") == "::1"
    assert all(is_loopback_name(n) for n in ("localhost", "app.localhost", "127.0.0.1", "127.8.9.1", "::1"))
    assert not any(is_loopback_name(n) for n in ("localhost.evil.example", "10.0.0.1", "0.0.0.0", "", "::"))
