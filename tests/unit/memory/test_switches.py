"""The memory switches: a temporary chat (TurnRequest.memory = False, from the facade, POST .../messages and chat
completions' `anaphora` field) recalls nothing and leaves nothing; `memory = "off"` turns both stages off."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from tests.server_harness import components_for, serve, settings_for, token
from tests.unit.server.test_history import wait_for

pytestmark = pytest.mark.unit
STATED = "I run chart version 2.7.3 on my k3s cluster."
ASKED = "Which chart version did I say I run?"


def facade(tmp_path: Path, **overrides) -> Anaphora:
    settings = Settings(
        data_dir=tmp_path / "data",
        chat_model="fake",
        embedder="hashing",
        similarity_threshold=0.0,
        memory_min_score=0.0,
        rewriter="expansion",
        **overrides,
    )
    return Anaphora(settings, model=FakeChatModel())


def remembered(rag: Anaphora) -> list[str]:
    rag.settle()  # memory is written in the background
    return [item.text for item in rag.memories().items]


def stage_names(result) -> list[str]:
    return [stage.name for stage in result.trace.stages]


def test_a_temporary_chat_recalls_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    with facade(tmp_path) as rag:
        rag.ask(STATED, rag.new_conversation())
        before = remembered(rag)
        assert any("2.7.3" in text for text in before)

        temporary = rag.ask(ASKED, rag.new_conversation(), memory=False)
        assert temporary.trace.memory == [] and "memory" not in stage_names(temporary)
        assert remembered(rag) == before  # the temporary turn left nothing

        normal = rag.ask(ASKED, rag.new_conversation())
        assert "memory" in stage_names(normal)
        assert any(m.injected and "2.7.3" in m.text for m in normal.trace.memory)
        assert len(remembered(rag)) > len(before)


def test_streaming_honours_the_temporary_flag(tmp_path: Path) -> None:
    with facade(tmp_path) as rag:
        rag.ask(STATED, rag.new_conversation())
        before = remembered(rag)
        *_, result = rag.stream(ASKED, rag.new_conversation(), memory=False)
        assert result.trace.memory == [] and remembered(rag) == before


def test_memory_off_writes_and_recalls_nothing(tmp_path: Path) -> None:
    with facade(tmp_path, memory="off") as rag:
        first = rag.ask(STATED, rag.new_conversation())
        second = rag.ask(ASKED, rag.new_conversation())
        assert remembered(rag) == []
        assert "memory" not in stage_names(first) + stage_names(second) and second.trace.memory == []


def test_the_http_api_passes_the_temporary_flag(tmp_path: Path, fake_model) -> None:
    settings = settings_for(tmp_path, memory_min_score=0.0)
    components = components_for(settings, fake_model)
    with serve(settings, components) as running, running.client("alice") as http:
        stated = http.post("/v1/conversations").json()["id"]
        http.post(f"/v1/conversations/{stated}/messages", json={"content": STATED}).raise_for_status()
        asked = http.post("/v1/conversations").json()["id"]

        def trace_of(**extra) -> dict:
            reply = http.post(f"/v1/conversations/{asked}/messages", json={"content": ASKED, **extra})
            reply.raise_for_status()
            return reply.json()["trace"]

        assert trace_of(memory=False)["memory"] == []  # turn 0 of `asked`
        assert any("2.7.3" in m["text"] for m in trace_of()["memory"])
        refused = http.post(f"/v1/conversations/{asked}/messages", json={"content": ASKED, "memory": "no"})
        assert refused.status_code == 422 and "memory" in refused.json()["error"]["message"]

        with openai.OpenAI(base_url=f"{running.url}/v1", api_key=token("alice"), max_retries=0) as client:
            messages = [{"role": "user", "content": ASKED}]
            plain = client.chat.completions.create(model="anaphora", messages=messages)
            temporary = client.chat.completions.create(
                model="anaphora", messages=messages, extra_body={"anaphora": {"memory": False}}
            )
            assert any("2.7.3" in m["text"] for m in plain.model_extra["anaphora"]["trace"]["memory"])
            assert temporary.model_extra["anaphora"]["trace"]["memory"] == []
            with pytest.raises(openai.UnprocessableEntityError, match="forget"):
                client.chat.completions.create(
                    model="anaphora", messages=messages, extra_body={"anaphora": {"forget": True}}
                )

        def turns_remembered() -> set[str]:
            rows = running.components.database.query(
                "SELECT turns FROM memory_items WHERE conversation_id = ?", (asked,)
            )
            return {row[0] for row in rows}

        wait_for(lambda: "[1]" in turns_remembered())  # the normal turn (index 1) was remembered ...
        assert "[0]" not in turns_remembered()  # ... the temporary one (index 0) was not


def test_the_facade_lists_forgets_exports_and_erases(tmp_path: Path) -> None:
    with facade(tmp_path) as rag:
        conversation = rag.new_conversation()
        rag.ask(STATED, conversation)
        rag.settle()
        page = rag.memories()
        assert page.next_offset is None and {i.conversation_id for i in page.items} == {conversation}
        fact = next(i for i in page.items if i.kind == "fact")
        assert "2.7.3" in fact.value
        rag.forget(fact.id)
        assert fact.id not in {i.id for i in rag.memories().items}
        exported = rag.export_memory()
        assert {i.id for i in exported.items} == {i.id for i in rag.memories().items}
        erased = rag.erase_user()
        assert erased["conversations"] == 1 and erased["memories"] == len(exported.items)
        assert rag.memories().items == () and rag.export_memory().entities == ()
