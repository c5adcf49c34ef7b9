"""Shared fixtures: settings in a temporary data dir, the fake chat model, the no-model embedder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from anaphora import Anaphora, FakeChatModel, Settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DOCS = ROOT / "examples" / "docs"
DEMO_SCRIPT = ROOT / "examples" / "demo_conversation.json"
# Under `.ci/run` a missing server or browser fails the run: CI must never pass by skipping a backend.
REQUIRED = os.environ.get("ANAPHORA_TEST_REQUIRE_SERVERS") == "1"


def unavailable(reason: str) -> None:
    """Skip, or fail when the run requires every server (CI)."""
    if REQUIRED:
        pytest.fail(f"{reason} (ANAPHORA_TEST_REQUIRE_SERVERS=1: CI needs it)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Run in an empty folder with no ANAPHORA_* variable, so nothing from the developer's machine (environment or
    ./anaphora.toml) leaks into the Settings under test. Returns that folder."""
    for key in list(os.environ):
        if key.startswith("ANAPHORA_"):
            monkeypatch.delenv(key)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # the hashing embedder's cosines are not calibrated like MiniLM's, so the 0.30 relevance floor is off here
    return Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", similarity_threshold=0.0)


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


@pytest.fixture(autouse=True, scope="session")
def no_network():
    """Nothing in the suite may reach beyond this machine: no model or data downloads at run time."""
    import ipaddress
    import os
    import socket

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    original = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None:
            try:
                local = host == "localhost" or ipaddress.ip_address(host).is_loopback
            except ValueError:
                local = False
            if not local:
                raise OSError(f"test tried to reach {host}: the suite must run offline")
        return original(self, address)

    socket.socket.connect = guarded
    yield
    socket.socket.connect = original
