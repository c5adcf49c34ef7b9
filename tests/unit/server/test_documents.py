"""The documents API: upload and path ingestion jobs, job status and reports, listing, deletion, admin only."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.server_harness import bearer, components_for, serve, settings_for

pytestmark = pytest.mark.unit
GUIDE = b"# Zephyr rotation\n\nRotate the zephyr keys every ninety days with `zephyr rotate --all`.\n"


@pytest.fixture
def running(tmp_path):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings)) as server:
        yield server


def admin(running) -> httpx.Client:
    return httpx.Client(base_url=running.url, headers=bearer("root", scope="admin"), timeout=30)


def retrieved_sources(http) -> set[str]:
    question = {"messages": [{"role": "user", "content": "How often do I rotate the zephyr keys?"}]}
    reply = http.post("/v1/chat/completions", json=question).json()
    return {passage["source"] for passage in reply["anaphora"]["trace"]["retrieved"]}


def finished(http, job_id: str, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_upload_reports_added_and_unsupported_files_as_skipped(running) -> None:
    with admin(running) as http:
        started = http.post(
            "/v1/documents",
            files=[("files", ("zephyr.md", GUIDE, "text/markdown")), ("files", ("tool.exe", b"MZ\0\0", "x/y"))],
        )
        assert started.status_code == 202, started.text
        assert started.json()["object"] == "ingest_job" and started.json()["status"] in ("queued", "running")
        job = finished(http, started.json()["job_id"])
        assert job["status"] == "done" and job["error"] is None
        report = job["report"]
        assert report["added"] == ["zephyr.md"] and report["chunks_written"] >= 1
        assert report["skipped"] == [{"path": "tool.exe", "reason": "unsupported file type .exe"}]
        assert job["progress"]["done"] == job["progress"]["total"] >= 1
        stored = running.components.settings.data_dir / "uploads" / job["id"] / "zephyr.md"
        assert stored.read_bytes() == GUIDE

        listed = {d["source"]: d for d in http.get("/v1/documents").json()["data"]}
        assert listed["zephyr.md"]["chunks"] == report["chunks_written"] and listed["zephyr.md"]["ingested_at"] > 0
        assert "install-kubernetes.md" in listed  # the sample docs the harness ingested

        again = finished(
            http, http.post("/v1/documents", files={"files": ("zephyr.md", GUIDE + b"More.\n")}).json()["job_id"]
        )
        assert again["report"]["updated"] == ["zephyr.md"] and again["report"]["added"] == []
        assert [d["source"] for d in http.get("/v1/documents").json()["data"]].count("zephyr.md") == 1
        assert not stored.exists()  # the earlier upload's file went with its document


def test_path_ingestion_then_delete(running, tmp_path) -> None:
    folder = tmp_path / "extra"
    folder.mkdir()
    (folder / "zephyr.md").write_bytes(GUIDE)
    with admin(running) as http:
        job = finished(http, http.post("/v1/documents", json={"path": str(folder)}).json()["job_id"])
        assert job["report"]["added"] == ["zephyr.md"]
        assert "zephyr.md" in retrieved_sources(http)  # searchable at once: the indexes follow the corpus
        missing = finished(http, http.post("/v1/documents", json={"path": str(tmp_path / "nope")}).json()["job_id"])
        assert missing["status"] == "done" and missing["report"]["skipped"][0]["reason"] == "does not exist"

        deleted = http.delete("/v1/documents/zephyr.md")
        assert deleted.status_code == 200
        assert deleted.json() == {"source": "zephyr.md", "object": "document.deleted", "deleted": True, "documents": 1}
        assert "zephyr.md" not in [d["source"] for d in http.get("/v1/documents").json()["data"]]
        assert http.delete("/v1/documents/zephyr.md").status_code == 404
        assert "zephyr.md" not in retrieved_sources(http)
        assert (folder / "zephyr.md").exists()  # a server-side file is the admin's, never deleted


def test_bad_requests(running) -> None:
    with admin(running) as http:
        unknown = http.get("/v1/jobs/doesnotexist")
        assert unknown.status_code == 404 and unknown.json()["error"]["hint"].endswith("POST /v1/documents returned")
        wrong_type = http.post("/v1/documents", content=b"hello", headers={"Content-Type": "text/plain"})
        assert wrong_type.status_code == 400 and "content type" in wrong_type.json()["error"]["message"]
        assert http.post("/v1/documents", json={"paths": ["x"]}).status_code == 400
        assert (
            http.post("/v1/documents", content=b"{oops", headers={"Content-Type": "application/json"}).status_code
            == 400
        )
        boundary = "b0undary"
        only_a_field = f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nx\r\n--{boundary}--\r\n'
        no_files = http.post(
            "/v1/documents",
            content=only_a_field.encode(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert no_files.status_code == 400 and "no files" in no_files.json()["error"]["message"]
        broken = http.post(
            "/v1/documents", content=b"garbage", headers={"Content-Type": "multipart/form-data; boundary=zz"}
        )
        assert broken.status_code == 400 and broken.json()["error"]["message"].endswith("Invalid multipart data.")
        hidden = http.post("/v1/documents", files={"files": (".env", b"SECRET=1")})
        job = finished(http, hidden.json()["job_id"])
        assert job["report"]["added"] == [] and job["report"]["skipped"][0]["path"] == ".env"


def test_non_admin_is_refused(running) -> None:
    with running.client("alice") as http:
        for method, path in [
            ("POST", "/v1/documents"),
            ("GET", "/v1/documents"),
            ("GET", "/v1/jobs/x"),
            ("DELETE", "/v1/documents/install-kubernetes.md"),
        ]:
            response = http.request(method, path, json={"path": "/"})
            assert response.status_code == 403, (method, path)
            assert response.json()["error"]["type"] == "permission_error"
    with running.client(None) as anonymous:
        assert anonymous.get("/v1/documents").status_code == 401
    assert "install-kubernetes.md" in [d.source for d in running.components.corpus.documents()]


def test_anyone_manages_documents_without_auth(tmp_path) -> None:
    settings = settings_for(tmp_path, auth="none")
    with serve(settings, components_for(settings)) as server, server.client(None) as http:
        job = finished(http, http.post("/v1/documents", files={"files": ("zephyr.md", GUIDE)}).json()["job_id"])
        assert job["report"]["added"] == ["zephyr.md"]


def test_jobs_run_one_at_a_time(running, monkeypatch) -> None:
    ingestor = running.components.ingestor
    original, active, peak, lock = ingestor.run, [0], [0], threading.Lock()

    def slow(*args, **kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        try:
            return original(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(ingestor, "run", slow)
    with admin(running) as http:
        ids = [
            http.post("/v1/documents", files={"files": (f"z{n}.md", GUIDE.replace(b"Zephyr", b"Z" * (n + 2)))}).json()[
                "job_id"
            ]
            for n in range(3)
        ]
        assert http.get(f"/v1/jobs/{ids[-1]}").json()["status"] == "queued"
        jobs = [finished(http, job_id) for job_id in ids]
    assert [j["status"] for j in jobs] == ["done"] * 3 and peak[0] == 1


def test_upload_names_too_long_or_with_a_control_character_are_skipped_and_the_job_goes_on(running) -> None:
    # found by the probes: a name over 255 bytes, or with a raw NUL, got a 500 for the whole upload (issue 25);
    # U+0085 (NEXT LINE), a line separator or a bidi override was accepted (issue 51)
    long_name = "é" * 128 + ".md"  # 259 bytes in UTF-8
    boundary = "b0undary"
    parts = b"".join(  # by hand: httpx would write the NUL as %00
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="'.encode()
        + name.encode()
        + b'"\r\nContent-Type: text/markdown\r\n\r\n'
        + GUIDE
        + b"\r\n"
        for name in (long_name, "nul\0name.md", "next\x85line.md", "line\u2028sep.md", "bidi\u202egnp.md", "zephyr.md")
    )
    body = parts + f"--{boundary}--\r\n".encode()
    with admin(running) as http:
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        started = http.post("/v1/documents", content=body, headers=headers)
        assert started.status_code == 202, started.text
        job = finished(http, started.json()["job_id"])
        assert job["status"] == "done" and job["report"]["added"] == ["zephyr.md"], job
        reasons = {s["path"]: s["reason"] for s in job["report"]["skipped"]}
        assert reasons[long_name] == "the file name is longer than 255 bytes; rename the file"
        for start, code_point in (("nul", "0000"), ("next", "0085"), ("line", "2028"), ("bidi", "202E")):
            assert [r for p, r in reasons.items() if p.startswith(start)] == [
                f"the file name holds a control or line-break character (U+{code_point}); rename the file"
            ], reasons


def test_a_pdf_past_pypdfs_decompression_limit_is_skipped_and_the_upload_job_goes_on(running) -> None:
    # found by the probe (issue 25): pypdf's LimitReachedError failed the whole job, so no file of it was indexed
    from pypdf.filters import ZLIB_MAX_OUTPUT_LENGTH

    from tests.documents import flate_bomb, make_pdf

    bomb = make_pdf("x", flate_content=flate_bomb(ZLIB_MAX_OUTPUT_LENGTH + (1 << 20)))
    with admin(running) as http:
        files = [("files", ("bomb.pdf", bomb, "application/pdf")), ("files", ("zephyr.md", GUIDE, "text/markdown"))]
        job = finished(http, http.post("/v1/documents", files=files).json()["job_id"], timeout_s=60)
        assert job["status"] == "done" and job["error"] is None, job
        assert job["report"]["added"] == ["zephyr.md"]
        [skipped] = job["report"]["skipped"]
        assert skipped["path"] == "bomb.pdf" and "expands past pypdf's limit" in skipped["reason"], skipped


def test_a_line_behind_100000_quote_markers_keeps_the_page_and_its_text(running) -> None:
    # found by the probe (issue 51): markdown-it stops at 20 nested blocks, so the page had "no body text"
    page = "# Deep quotes\n\n" + ">" * 100_000 + " The zephyr keys rotate every ninety days.\n\nAfter the quote.\n"
    with admin(running) as http:
        job = finished(http, http.post("/v1/documents", files={"files": ("deep.md", page.encode())}).json()["job_id"])
        assert job["status"] == "done" and job["report"]["added"] == ["deep.md"], job
        assert job["report"]["skipped"] == []
    chunks = running.components.corpus.chunks(list(running.components.corpus.keys_and_texts()[0]))
    text = " ".join(c.text for c in chunks.values() if c.source == "deep.md")
    assert "zephyr keys rotate every ninety days" in text and "After the quote." in text


def test_the_service_embeds_the_answer_units_from_its_start_and_after_each_job(tmp_path) -> None:
    """Units an ingestion left (stopped, or --answer-units later) are embedded by the running service in the
    background, and so are those of a job's documents; answers are quoted meanwhile."""
    settings = settings_for(tmp_path, answer_mode="extractive")
    components = components_for(settings)
    units = components.answer_units
    assert units is not None and units.pending()  # ingested, units not embedded yet

    def embedded(timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while units.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not units.pending()

    with serve(settings, components) as server, admin(server) as http:
        assert embedded()
        folder = tmp_path / "extra"
        folder.mkdir()
        (folder / "zephyr.md").write_bytes(GUIDE)
        job = finished(http, http.post("/v1/documents", json={"path": str(folder)}).json()["job_id"])
        assert job["status"] == "done"
        assert embedded()
        rotation = components.embedder.known(["Rotate the zephyr keys every ninety days with `zephyr rotate --all`."])
        assert rotation  # the job's passage's sentence is in the cache
