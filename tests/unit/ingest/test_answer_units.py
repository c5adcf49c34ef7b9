"""The answer units (what a quoted answer judges) are embedded after the passages, which are searchable first; a
turn before they are done embeds what it needs; a stopped run resumes where it stopped."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from anaphora.answering.extractive import JUDGED_CHARS, ExtractiveAnswerer, judged_texts
from anaphora.app import Anaphora, Components, build_components
from anaphora.ingest import units as units_module
from anaphora.ingest.units import AnswerUnits, UnitsInBackground, _exclusive
from anaphora.model_defaults import embeds_answer_units
from anaphora.settings import Settings
from anaphora.types import Passage

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]

PAGE = (
    "# Retention\n\nRetention is off by default. Turn it on in the compactor block:\n\n"
    "```yaml\ncompactor:\n  retention_enabled: true\n```\n\n"
    "| Setting | Default |\n|---|---|\n| `retention_period` | `0s` |\n| `retention_delete_delay` | `2h` |\n\n"
    "Deleted chunks are removed after the delete delay has passed.\n"
)


def docs_folder(tmp_path: Path, pages: int = 1) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for n in range(pages):
        (docs / f"retention-{n}.md").write_text(PAGE.replace("Retention", f"Retention {n}"), encoding="utf-8")
    return docs


def components(tmp_path: Path, **overrides) -> Components:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", **overrides)
    return build_components(settings)


def passages(app: Components) -> list[Passage]:
    rows = app.database.query("SELECT id, text FROM chunks ORDER BY key")
    return [Passage(id=r["id"], text=r["text"]) for r in rows]


async def first_answer_misses(app: Components) -> tuple[int, int]:
    """(texts the first answer had to embed, texts it judged)."""
    shown = passages(app)
    judged = {t for p in shown for t in judged_texts(p.text)}
    before = app.embedder.misses
    answer = await ExtractiveAnswerer(app.embedder, min_relevance=0.0).answer(
        "turn on retention", "how do I turn on retention?", shown
    )
    assert answer is not None
    return app.embedder.misses - before, len(judged)


async def test_the_units_come_after_the_passages_and_then_the_first_answer_embeds_nothing(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="extractive")
    try:
        report = app.ingestor.run([docs_folder(tmp_path)])
        assert report.chunks_written and report.ahead_embedded == 0  # the passages alone
        assert app.answer_units is not None and app.answer_units.pending()
        done = app.answer_units.run()
        assert done.finished and not done.busy and done.embedded == done.units >= 4
        assert not app.answer_units.pending()
        missed, judged = await first_answer_misses(app)
        assert judged >= 4  # a lead-in with its block, the block, a table row, a sentence
        assert missed == 2  # the query and the question: every unit's vector was in the cache
        again = app.answer_units.run()
        assert again.finished and again.embedded == 0 and again.passages == 0  # the mark spares the scan
    finally:
        app.database.close()


async def test_a_turn_before_the_units_are_embedded_answers_and_embeds_what_it_needs(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="extractive")
    try:
        app.ingestor.run([docs_folder(tmp_path)])
        assert app.answer_units is not None and app.answer_units.pending()
        missed, judged = await first_answer_misses(app)
        assert missed == 2 + judged
        done = app.answer_units.run()  # what the turn embedded is not embedded again
        assert done.finished and done.embedded == 0
    finally:
        app.database.close()


def test_a_question_asked_before_the_units_are_embedded_is_answered_with_citations(tmp_path: Path) -> None:
    quoted = {"answer_mode": "extractive", "similarity_threshold": 0.0, "extractive_min_relevance": 0.0}
    with Anaphora(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", **quoted) as rag:
        rag.ingest([docs_folder(tmp_path)])
        assert rag.components.answer_units is not None and rag.components.answer_units.pending()
        result = rag.ask("How do I turn on retention in the compactor?")
        assert "retention_enabled" in result.answer
        assert result.citations and result.citations[0].id.startswith("retention-0.md#")


def test_a_stopped_run_keeps_what_it_embedded_and_the_next_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(units_module, "SLICE", 1)
    app = components(tmp_path, answer_mode="extractive")
    try:
        app.ingestor.run([docs_folder(tmp_path, pages=3)])
        assert app.answer_units is not None
        stop = threading.Event()
        first = app.answer_units.run(progress=lambda done, total: stop.set(), stop=stop)  # stopped after one step
        assert not first.finished and 0 < first.passages < app.corpus.chunk_count()
        assert app.answer_units.pending()
        second = AnswerUnits(app.corpus, app.embedder, judged_texts).run()  # a new process: the cache is the record
        assert second.finished and not app.answer_units.pending()
        every = {t for p in passages(app) for t in judged_texts(p.text)}
        assert first.embedded + second.embedded == len(every)  # nothing twice, nothing left
        assert len(app.embedder.known(list(every))) == len(every)
    finally:
        app.database.close()


def test_a_new_ingestion_makes_the_units_pending_again(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="extractive")
    try:
        docs = docs_folder(tmp_path)
        app.ingestor.run([docs])
        assert app.answer_units is not None and app.answer_units.run().finished
        (docs / "more.md").write_text("# More\n\nA new page about the delete delay and its default value.\n")
        app.ingestor.run([docs])
        assert app.answer_units.pending()
        assert app.answer_units.run().embedded >= 1
    finally:
        app.database.close()


def test_one_run_per_data_dir_at_a_time(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="extractive")
    try:
        app.ingestor.run([docs_folder(tmp_path)])
        assert app.answer_units is not None and app.answer_units.lock_path is not None
        with _exclusive(app.answer_units.lock_path) as mine:
            assert mine
            busy = app.answer_units.run()
        assert busy.busy and busy.embedded == 0 and app.answer_units.pending()
        assert app.answer_units.run().finished
    finally:
        app.database.close()


def test_the_background_runner_finishes_the_units(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="extractive")
    try:
        app.ingestor.run([docs_folder(tmp_path, pages=2)])
        assert app.answer_units is not None
        reports = []
        background = UnitsInBackground(app.answer_units, on_report=reports.append)
        background.kick()
        assert background.wait(30)
        assert reports and reports[-1].finished and not app.answer_units.pending()
        background.stop()
    finally:
        app.database.close()


def test_no_units_phase_when_answers_are_generated(tmp_path: Path) -> None:
    app = components(tmp_path, answer_mode="generate")
    try:
        assert app.answer_units is None
    finally:
        app.database.close()


def test_units_are_embedded_ahead_by_default_only_when_answers_are_quoted() -> None:
    assert embeds_answer_units(Settings().ingest, "extractive")
    assert not embeds_answer_units(Settings().ingest, "auto")
    assert not embeds_answer_units(Settings().ingest, "generate")
    assert embeds_answer_units(Settings(embed_answer_units=True).ingest, "generate")
    assert not embeds_answer_units(Settings(embed_answer_units=False).ingest, "extractive")


def test_judged_texts_are_what_the_answerer_embeds() -> None:
    passage = Passage(id="retention.md#1", text=PAGE)
    answerer_texts = {(c.context or c.text)[:JUDGED_CHARS] for c in ExtractiveAnswerer.candidates([passage])}
    assert set(judged_texts(PAGE)) == answerer_texts
