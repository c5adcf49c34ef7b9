"""The demo's memory step with the embedded defaults (SmolLM2, MiniLM, extractive answers): in a new conversation,
"which chart version did I say I run?" is answered from what the user said in the first one, cited as a memory
with its provenance; no document has that version."""

from __future__ import annotations

import json

import pytest

from anaphora import Anaphora, Settings
from tests.conftest import DEMO_SCRIPT, SAMPLE_DOCS

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TURNS = json.loads(DEMO_SCRIPT.read_text())["turns"]


def test_a_new_conversation_answers_from_memory_with_provenance(tmp_path) -> None:
    (asked,) = [t for t in TURNS if t.get("new_conversation")]
    remembered = asked["remembers"]
    stated = next(t["user"] for t in TURNS if remembered in t["user"])
    assert not any(remembered in p.read_text(encoding="utf-8") for p in SAMPLE_DOCS.rglob("*") if p.is_file())
    with Anaphora(Settings(data_dir=tmp_path, answer_max_tokens=48)) as rag:
        rag.ingest([SAMPLE_DOCS])
        first = rag.new_conversation()
        rag.ask("How do I install Kestrel on Kubernetes?", first)
        rag.ask(stated, first)
        rag.settle()
        result = rag.ask(asked["user"], rag.new_conversation())
    assert remembered in result.answer.split("\n")[0]  # what answers the question leads, ahead of the documents
    cited = {c.id for c in result.citations}
    sources = [m for m in result.trace.memory if m.injected and m.passage_id in cited and remembered in m.text]
    assert sources, (result.answer, result.trace.memory)
    assert all(m.conversation_id == first and m.turns == [1] for m in sources)
