"""A corpus change (upload, path job, document delete) never makes a turn wait for the search indexes' rebuild: the
turn is answered from the previous generation while the next one builds, and the new one serves once built."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from anaphora.retrieval.bm25 import BM25Index
from tests.unit.server.test_documents import admin, running

pytestmark = pytest.mark.unit
__all__ = ["admin", "running"]  # the documents tests' server and admin client
GUIDE = b"# Zephyr rotation\n\nRotate the zephyr keys every ninety days with `zephyr rotate --all`.\n"
QUESTION = "How often do I rotate the zephyr keys?"


class GatedBuilds:
    """Holds every BM25 build (i.e. every index rebuild) until released: a builder as slow as the test wants."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def wait_entered(self) -> None:
        assert self.entered.wait(20), "no index rebuild started"


def timed_sources(http: httpx.Client, question: str = QUESTION) -> tuple[float, set[str]]:
    started = time.perf_counter()
    reply = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": question}]})
    assert reply.status_code == 200, reply.text
    return time.perf_counter() - started, {p["source"] for p in reply.json()["anaphora"]["trace"]["retrieved"]}


def job_status(http: httpx.Client, job_id: str) -> str:
    return http.get(f"/v1/jobs/{job_id}").json()["status"]


def hold_builds(monkeypatch: pytest.MonkeyPatch, gate: GatedBuilds) -> None:
    original = BM25Index.build.__func__

    def slow(cls, keys, texts):
        gate.entered.set()
        assert gate.release.wait(30), "the test never released the rebuild"
        return original(cls, keys, texts)

    monkeypatch.setattr(BM25Index, "build", classmethod(slow))


def test_a_turn_during_an_upload_rebuild_is_answered_from_the_previous_generation(running, monkeypatch) -> None:
    gate = GatedBuilds()
    with admin(running) as http:
        timed_sources(http)  # warm: the first generation is built
        hold_builds(monkeypatch, gate)
        try:
            job_id = http.post("/v1/documents", files={"files": ("zephyr.md", GUIDE, "text/markdown")}).json()["job_id"]
            gate.wait_entered()  # the job wrote the passages and is rebuilding: held there
            seconds, sources = timed_sources(http)
            assert seconds < 5, f"the turn waited {seconds:.1f} s for the rebuild"
            assert "zephyr.md" not in sources, "served from the previous generation, which lacks the upload"
            assert job_status(http, job_id) == "running", "the job is done only once its passages are searchable"
        finally:
            gate.release.set()
        deadline = time.monotonic() + 30
        while job_status(http, job_id) != "done":
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.05)
        assert "zephyr.md" in timed_sources(http)[1], "once the job is done its upload is searchable"


def test_a_turn_after_a_delete_does_not_wait_and_never_shows_the_deleted_document(running, monkeypatch) -> None:
    gate = GatedBuilds()
    with admin(running) as http:
        question = "How do I install Kubernetes?"
        assert "install-kubernetes.md" in timed_sources(http, question)[1]
        hold_builds(monkeypatch, gate)
        try:
            assert http.delete("/v1/documents/install-kubernetes.md").status_code == 200
            seconds, sources = timed_sources(http, question)
            gate.wait_entered()  # the turn noticed the change and started the rebuild, in the background
            assert seconds < 5, f"the turn waited {seconds:.1f} s for the rebuild"
            assert "install-kubernetes.md" not in sources, "a deleted passage is left out at once"
            assert running.components.passages.indexes.wait_for_rebuild(0.05) is False, "still rebuilding"
        finally:
            gate.release.set()
        assert running.components.passages.indexes.wait_for_rebuild(30)
        assert "install-kubernetes.md" not in timed_sources(http, question)[1]
