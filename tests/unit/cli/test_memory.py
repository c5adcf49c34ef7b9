"""`anaphora memory list | forget | export` end to end (real subprocesses), on a store seeded through the facade."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings
from anaphora.memory.types import EntityMention
from anaphora.pipeline.state import LOCAL_USER
from anaphora.testing.memory_contract import EMBEDDER, episode, fact
from tests.unit.cli.test_main import run

pytestmark = pytest.mark.unit


def seed(tmp_path: Path) -> list[str]:
    """Two episodes and a superseded fact (chart 2.7.0, then 2.8.0 from turns 1 and 2) of the local user, and one
    episode of another user that the CLI must never show."""
    settings = Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing")
    items = [
        episode(LOCAL_USER, "I run Kestrel on k3s", conversation="conv-a", turn=0, time=1_700_000_000.0),
        replace(fact(LOCAL_USER, "chart version", "2.7.0", time=1_700_000_100.0), conversation_id="conv-a"),
        replace(
            fact(LOCAL_USER, "chart version", "2.8.0", time=1_700_000_200.0), conversation_id="conv-b", turns=(1, 2)
        ),
        episode(LOCAL_USER, "the agent was OOMKilled", conversation="conv-b", turn=3, time=1_700_000_300.0),
    ]
    stranger = episode("mallory", "mallory's secret plan", conversation="conv-m", time=1_700_000_400.0)
    with Anaphora(settings, model=FakeChatModel()) as rag:
        memory = rag.components.memory
        for item in items:  # one by one, so the newer fact supersedes the older
            rag.run(memory.add(LOCAL_USER, [item], EMBEDDER.embed([item.text])))
        rag.run(memory.add("mallory", [stranger]))
        rag.run(memory.upsert_entities(LOCAL_USER, [EntityMention("Kestrel", "product", 1_700_000_000.0)]))
        rag.run(memory.set_profile(LOCAL_USER, "runs Kestrel on k3s", ["conv-a"]))
    return [i.id for i in items]


def test_list_shows_provenance_and_validity_newest_first(tmp_path: Path) -> None:
    ids = seed(tmp_path)
    listed = run(tmp_path, "memory", "list")
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert [out.index(i) for i in reversed(ids)] == sorted(out.index(i) for i in ids)  # newest first
    assert "conversation conv-b, turns 2, 3, 2023-11-14 22:16 UTC · current" in out  # counted from 1
    assert "conversation conv-a, turn 1, 2023-11-14 22:15 UTC · until 2023-11-14 22:16 UTC" in out
    assert "mallory" not in out
    facts = run(tmp_path, "memory", "list", "--kind", "fact", "--limit", "1").stdout
    assert ids[2] in facts and ids[1] not in facts and "--offset 1 --limit 1" in facts


def test_export_writes_json_lines_of_everything(tmp_path: Path) -> None:
    ids = seed(tmp_path)
    exported = run(tmp_path, "memory", "export")
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["object"] for r in records] == ["memory"] * 4 + ["entity", "profile"]
    assert [r["id"] for r in records[:4]] == ids[::-1]
    assert records[1]["provenance"] == {
        "conversation_id": "conv-b",
        "turns": [1, 2],
        "time": 1_700_000_200.0,
        "said_by": "user",
    }
    assert records[1]["current"] is True and records[2]["valid_to"] == 1_700_000_200.0
    assert {r["user_id"] for r in records} == {LOCAL_USER}
    target = tmp_path / "memory.jsonl"
    assert run(tmp_path, "memory", "export", "--output", str(target)).returncode == 0
    assert target.read_text(encoding="utf-8") == exported.stdout
    again = run(tmp_path, "memory", "export", "--output", str(target))
    assert again.returncode == 1 and "exists already" in again.stderr and "fix:" in again.stderr
    assert target.read_text(encoding="utf-8") == exported.stdout  # not overwritten


def test_forget_removes_one_item_and_says_so(tmp_path: Path) -> None:
    ids = seed(tmp_path)
    forgotten = run(tmp_path, "memory", "forget", ids[0])
    assert forgotten.returncode == 0 and f"forgot {ids[0]}" in forgotten.stdout
    listed = run(tmp_path, "memory", "list").stdout
    assert ids[0] not in listed and all(i in listed for i in ids[1:])
    again = run(tmp_path, "memory", "forget", ids[0])
    assert again.returncode == 1
    assert f"no memory '{ids[0]}'" in again.stderr and "anaphora memory list" in again.stderr


@pytest.mark.parametrize("args", [("list", "--limit", "0"), ("list", "--kind", "secrets"), ("forget",)])
def test_bad_arguments_are_refused_with_usage(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run(tmp_path, "memory", *args)
    assert result.returncode == 2 and "Usage" in result.stderr and "Traceback" not in result.stderr
