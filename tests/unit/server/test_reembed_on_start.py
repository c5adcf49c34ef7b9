"""A service started on an index that another embedder embedded (the other precision) re-embeds it in the
background: turns are refused with a hint until then, and answered after."""

from __future__ import annotations

import time

import httpx
import pytest

from anaphora.store import Database
from tests.server_harness import bearer, components_for, serve, settings_for

pytestmark = pytest.mark.unit
QUESTION = {"messages": [{"role": "user", "content": "How do I install Kestrel with Helm on Kubernetes?"}]}


def test_the_service_re_embeds_a_stale_index_and_then_answers(tmp_path) -> None:
    settings = settings_for(tmp_path, answer_mode="extractive")
    components = components_for(settings)
    with components.database.transaction() as db:  # as if the passages had been embedded at the other precision
        Database.set_meta(db, "corpus_embedder", "hashing-384-int8")
    assert components.ingestor.needs_reembedding()
    with (
        serve(settings, components) as server,
        httpx.Client(base_url=server.url, headers=bearer("someone"), timeout=30) as http,
    ):
        deadline = time.monotonic() + 30
        while components.ingestor.needs_reembedding() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert components.corpus.embedder() == "hashing-384"
        reply = None
        while time.monotonic() < deadline:  # the indexes are rebuilt for the new generation in the background
            reply = http.post("/v1/chat/completions", json=QUESTION)
            if reply.status_code == 200:
                break
            time.sleep(0.1)
        assert reply is not None and reply.status_code == 200, reply.text if reply is not None else ""
        assert reply.json()["anaphora"]["citations"]
