"""Documentation that must not drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import anaphora
from anaphora.settings import reference_markdown

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_current() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert reference_markdown() in text, "run: python scripts/gen_config_docs.py"


def test_readme_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```(?:bash|sh)\n(.*?)```", quick_start, re.DOTALL)
    lines = [line for block in commands for line in block.strip().splitlines() if not line.startswith("#")]
    assert len(lines) == 2, lines
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert lines[1].strip() in ci


def test_public_api_is_pinned() -> None:
    assert sorted(anaphora.__all__) == sorted(set(anaphora.__all__))
    for name in anaphora.__all__:
        assert hasattr(anaphora, name), name
    assert {"Anaphora", "Engine", "Settings", "FakeChatModel", "TurnResult", "AnaphoraError"} <= set(anaphora.__all__)
