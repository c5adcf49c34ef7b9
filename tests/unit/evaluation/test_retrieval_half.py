"""Evaluation's own list of the retrieval stages: the same stages a turn runs, built from the same parts, so it
retrieves what a turn retrieves; baselines and experiments change that list only, never the running engine's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anaphora import Anaphora, Message
from anaphora.evaluation import Task, replay, retrieval_half
from anaphora.evaluation.baselines import FixedQuery
from anaphora.pipeline.stages import BoostEntities
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit

FIRST = "How do I install Kestrel on Kubernetes?"
HISTORY = [Message(role="user", content=FIRST), Message(role="assistant", content="Use the Helm chart.")]


def test_it_holds_the_engine_s_retrieval_stages_in_order(sample_rag: Anaphora) -> None:
    half = retrieval_half(sample_rag.components)
    expected = [s.name for s in sample_rag.components.engine.stages if s.retrieval]
    assert [s.name for s in half.stages] == expected and "answer" not in expected


def test_it_retrieves_what_a_turn_retrieves(sample_rag: Anaphora) -> None:
    result = sample_rag.ask("And on ARM?", history=HISTORY)
    _, trace = sample_rag.run(retrieval_half(sample_rag.components).run("And on ARM?", HISTORY))
    assert trace.query == result.trace.query
    assert [p.id for p in trace.retrieved] == [p.id for p in result.trace.retrieved]


def test_a_baseline_query_changes_the_half_not_the_engine(sample_rag: Anaphora) -> None:
    engine_stages = list(sample_rag.components.engine.stages)
    half = retrieval_half(sample_rag.components)
    fixed = half.with_query(FixedQuery("backup and restore", "last-turn"))
    _, trace = sample_rag.run(fixed.run("And on ARM?", HISTORY))
    assert (trace.query, trace.query_source) == ("backup and restore", "last-turn")
    assert sample_rag.components.engine.stages == engine_stages
    _, own = sample_rag.run(half.run("And on ARM?", HISTORY))
    assert own.query != "backup and restore"  # the half it was made from keeps its own query stage


def test_an_experiment_inserts_a_stage_where_asked(sample_rag: Anaphora) -> None:
    components = sample_rag.components
    half = retrieval_half(components)
    boost = BoostEntities(components.passages.term_statistics, 0.3)
    boosted = half.with_stage(boost, after="retrieve")
    names = [s.name for s in boosted.stages]
    assert names.index("entity_boost") == names.index("retrieve") + 1 and "entity_boost" not in [
        s.name for s in half.stages
    ]
    _, trace = sample_rag.run(boosted.run(FIRST, []))
    assert trace.stage("entity_boost") is not None  # it ran, between retrieve and select
    with pytest.raises(ValueError, match="no stage named 'rerun'"):
        half.with_stage(boost, after="rerun")


def test_replay_scores_each_source_through_the_half(sample_rag: Anaphora, tmp_path: Path) -> None:
    tasks = [Task(task_id="arm", history=HISTORY, question="And on ARM?", last_turn="And on ARM?")]
    half = retrieval_half(sample_rag.components)
    pipeline = sample_rag.run(replay(half, tasks, "pipeline"))
    last_turn = sample_rag.run(replay(half, tasks, "last-turn"))
    assert last_turn[0]["query"] == "And on ARM?" and last_turn[0]["query_source"] == "last-turn"
    assert pipeline[0]["query"] != "And on ARM?"  # the history expansion adds the topic
    (tmp_path / "records.json").write_text(json.dumps(pipeline))  # the records are plain JSON


def test_the_cli_replays_tasks(tmp_path: Path) -> None:
    from tests.unit.cli.test_main import run

    tasks = tmp_path / "tasks.jsonl"
    task = {"task_id": "arm", "history": [m.model_dump() for m in HISTORY], "question": "And on ARM?", "gold": []}
    tasks.write_text(json.dumps(task) + "\n")
    done = run(tmp_path, "eval", "retrieval", "--corpus", str(SAMPLE_DOCS), "--tasks", str(tasks))
    assert done.returncode == 0, done.stderr
    rewrite = run(tmp_path, "eval", "rewrite", "--tasks", str(tasks))
    assert "reference rewrite" in (rewrite.stdout + rewrite.stderr)
