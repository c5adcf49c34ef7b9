"""What `anaphora --help` offers and how piped output is laid out (issue 25): the help listed four of the five
chat-model schemes, and piped `--trace` tables and summaries wrapped at Rich's default 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anaphora.models.registry import BUILTIN_CHAT_MODELS
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.unit


def anaphora(tmp_path: Path, *args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "COLUMNS" and not k.startswith("ANAPHORA_")}
    environment |= {"ANAPHORA_CHAT_MODEL": "fake", "ANAPHORA_EMBEDDER": "hashing"}
    environment |= {"ANAPHORA_DATA_DIR": str(tmp_path / "data"), "ANAPHORA_SIMILARITY_THRESHOLD": "0"}
    if columns is not None:
        environment["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "anaphora", *args],
        capture_output=True,  # pipes, and no terminal on stdin either
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=120,
    )


def test_help_lists_every_built_in_chat_model_scheme(tmp_path: Path) -> None:
    shown = anaphora(tmp_path, "--help", columns="200").stdout
    for scheme in BUILTIN_CHAT_MODELS:
        assert f"{scheme}" in shown, (scheme, shown)
    assert "anthropic:MODEL" in shown and "openai:MODEL" in shown and "gguf:PATH" in shown


def test_piped_output_is_not_wrapped_at_80_columns(tmp_path: Path) -> None:
    ingested = anaphora(tmp_path, "ingest", str(SAMPLE_DOCS))
    assert ingested.returncode == 0, ingested.stderr
    summary = [line for line in ingested.stdout.splitlines() if line.startswith("Ingested in")]
    assert summary and "chunks written" in summary[0] and summary[0].rstrip().endswith("."), ingested.stdout  # one line
    traced = anaphora(tmp_path, "ask", "--trace", "How do I install Kestrel on Kubernetes?")
    assert traced.returncode == 0, traced.stderr
    table = [line for line in traced.stdout.splitlines() if line.startswith(("┃", "│", "|"))]
    assert table and max(map(len, table)) > 80, traced.stdout  # the trace's table took the width it needs
    assert anaphora(tmp_path, "ingest", str(SAMPLE_DOCS), columns="100").stdout.splitlines()[0].startswith("Ingested")
