"""`anaphora ingest` says when the passages are searchable and leaves the answer units to a background process (or
embeds them there with --answer-units wait); `anaphora units` resumes them. Real subprocesses, no-model embedder."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from anaphora.cli.units import background_settings, child_arguments
from anaphora.settings import Settings
from tests.conftest import SAMPLE_DOCS
from tests.unit.cli.test_main import run

pytestmark = pytest.mark.unit

QUOTED = {"ANAPHORA_ANSWER_MODE": "extractive"}


def test_ingest_can_embed_the_units_itself_after_saying_the_passages_are_searchable(tmp_path: Path) -> None:
    result = run(tmp_path, "ingest", "--answer-units", "wait", str(SAMPLE_DOCS), env=QUOTED)
    assert result.returncode == 0, result.stderr
    searchable = result.stdout.index("Searchable now")
    assert result.stdout.index("Ingested") < searchable < result.stdout.index("Answer units: all embedded")
    again = run(tmp_path, "units", env=QUOTED)
    assert again.returncode == 0, again.stderr
    assert "Answer units: all embedded; 0 embedded now" in again.stdout


def test_by_default_ingest_returns_and_a_background_process_embeds_the_units(tmp_path: Path) -> None:
    result = run(tmp_path, "ingest", str(SAMPLE_DOCS), env=QUOTED)
    assert result.returncode == 0, result.stderr
    assert "Searchable now" in result.stdout
    pid = int(re.search(r"in the background \(pid (\d+)", result.stdout).group(1))
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = (tmp_path / "data" / "answer-units.log").read_text()
    assert "Answer units: all embedded" in log
    asked = run(tmp_path, "ask", "How do I install Kestrel with Helm on Kubernetes?", env=QUOTED)
    assert asked.returncode == 0 and "[install-kubernetes.md#" in asked.stdout


def test_later_leaves_them_and_units_embeds_them(tmp_path: Path) -> None:
    result = run(tmp_path, "ingest", "--answer-units", "later", str(SAMPLE_DOCS), env=QUOTED)
    assert result.returncode == 0, result.stderr
    assert "Answer units: not embedded yet" in result.stdout
    done = run(tmp_path, "units", "--progress-every", "0", env=QUOTED)
    assert done.returncode == 0, done.stderr
    assert re.search(r"all embedded; [1-9][\d,]* embedded now", done.stdout)
    assert "answer units: " in done.stderr and "passages done" in done.stderr  # the phase names itself


def test_without_quoted_answers_there_is_no_units_phase(tmp_path: Path) -> None:
    result = run(tmp_path, "ingest", str(SAMPLE_DOCS), env={"ANAPHORA_ANSWER_MODE": "generate"})
    assert result.returncode == 0, result.stderr
    assert "Searchable now" in result.stdout and "Answer units" not in result.stdout


def test_the_child_gets_this_process_s_settings() -> None:
    options = {"data_dir": None, "config_file": Path("a.toml"), "chat_model": "fake", "embedder": None, "top_k": "3"}
    assert child_arguments(options, Path("/d")) == [
        "--data-dir", "/d", "--config", "a.toml", "--chat-model", "fake", "--set", "top_k=3",
    ]  # fmt: skip


def test_the_background_run_does_not_spin_its_threads(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert settings.models.embedder_spin_wait
    quiet = background_settings(settings)
    assert not quiet.models.embedder_spin_wait
    assert quiet.models.model_copy(update={"embedder_spin_wait": True}) == settings.models
    assert quiet.data_dir == settings.data_dir
