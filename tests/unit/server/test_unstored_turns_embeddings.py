"""A turn stored nowhere (a stateless chat completion, ``store: false``) or a temporary one (``memory: false``)
leaves no vector of the user's words in the persistent embedding cache, which erase could not reach (issue 51);
a stored turn's words are cached, and erase names them."""

from __future__ import annotations

import pytest

from anaphora.embeddings import cache_key
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


@pytest.fixture
def running(tmp_path):
    settings = settings_for(tmp_path)
    with serve(settings, components_for(settings)) as server:
        yield server


def cached(running, trace: dict) -> list[str]:
    """Which of the turn's texts (its question and retrieval queries) have a vector in the persistent cache."""
    embedder = running.components.embedder
    texts = {trace["question"], trace["query"], *trace.get("alternate_queries", [])} - {""}
    found = embedder.cache.get_many([cache_key(embedder.name, t) for t in texts])
    return [t for t in texts if cache_key(embedder.name, t) in found]


def test_unstored_and_temporary_turns_leave_no_vector_in_the_cache_and_stored_ones_do(running) -> None:
    with running.client("alice") as http:
        chat = http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "How do I install Kestrel on a quokka cluster?"}]},
        )
        assert chat.status_code == 200, chat.text
        assert cached(running, chat.json()["anaphora"]["trace"]) == []

        unstored = http.post(
            "/v1/responses", json={"input": "Which ports does Kestrel open for wombats?", "store": False}
        )
        assert unstored.status_code == 200, unstored.text
        assert cached(running, unstored.json()["anaphora"]["trace"]) == []

        conversation = http.post("/v1/conversations").json()["id"]
        temporary = http.post(
            f"/v1/conversations/{conversation}/messages",
            json={"content": "How do I upgrade Kestrel for numbats?", "memory": False},
        )
        assert temporary.status_code == 200, temporary.text
        assert cached(running, temporary.json()["trace"]) == []

        stored = http.post(
            f"/v1/conversations/{conversation}/messages", json={"content": "How do I upgrade Kestrel for bilbies?"}
        )
        assert stored.status_code == 200, stored.text
        assert cached(running, stored.json()["trace"]), "a stored turn's query is cached (and erase names it)"
