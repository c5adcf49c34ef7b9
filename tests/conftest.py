"""Shared fixtures: settings in a temporary data dir, the fake chat model, the no-model embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DOCS = ROOT / "examples" / "docs"
DEMO_SCRIPT = ROOT / "examples" / "demo_conversation.json"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing")


@pytest.fixture
def fake_model() -> FakeChatModel:
    return FakeChatModel()


@pytest.fixture
def rag(settings: Settings, fake_model: FakeChatModel):
    with Anaphora(settings, model=fake_model) as instance:
        yield instance


@pytest.fixture
def sample_rag(rag: Anaphora) -> Anaphora:
    rag.ingest([SAMPLE_DOCS])
    return rag
