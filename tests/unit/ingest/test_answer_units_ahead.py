"""Ingestion embeds what a quoted answer judges ahead, so the first answer from a passage embeds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora.answering.extractive import JUDGED_CHARS, ExtractiveAnswerer, judged_texts
from anaphora.app import build_components
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


async def first_answer_misses(tmp_path: Path, **overrides) -> tuple[int, int]:
    """(texts the first answer had to embed, texts it judged), after ingesting :data:`PAGE`."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "retention.md").write_text(PAGE, encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", chat_model="fake", **overrides)
    app = build_components(settings)
    try:
        report = app.ingestor.run([docs])
        rows = app.database.query("SELECT id, text FROM chunks ORDER BY key")
        passages = [Passage(id=r["id"], text=r["text"]) for r in rows]
        judged = {t for p in passages for t in judged_texts(p.text)}
        before = app.embedder.misses
        answer = await ExtractiveAnswerer(app.embedder, min_relevance=0.0).answer(
            "turn on retention", "how do I turn on retention?", passages
        )
        assert answer is not None
        assert report.ahead_embedded == (len(judged) if app.ingestor.ahead else 0)
        return app.embedder.misses - before, len(judged)
    finally:
        app.database.close()


async def test_ingest_embeds_the_judged_units_ahead_when_answers_are_quoted(tmp_path: Path) -> None:
    missed, judged = await first_answer_misses(tmp_path, answer_mode="extractive")
    assert judged >= 4  # a lead-in with its block, the block, a table row, a sentence
    assert missed == 2  # the query and the question: every unit's vector was in the cache


async def test_without_it_the_first_answer_embeds_every_unit(tmp_path: Path) -> None:
    missed, judged = await first_answer_misses(tmp_path, answer_mode="extractive", embed_answer_units=False)
    assert missed == 2 + judged


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
