"""Long-term memory sits below the pipeline and the server: no module of anaphora.memory imports either, not even
inside a function (what memory needs of the answer check is passed in: anaphora.app.fact_support)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
MEMORY = Path(__file__).resolve().parents[3] / "src" / "anaphora" / "memory"
ABOVE = ("anaphora.pipeline", "anaphora.server", "anaphora.app", "anaphora.cli")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_memory_imports_nothing_above_it() -> None:
    upward = {
        f"{path.name}: {name}"
        for path in sorted(MEMORY.glob("*.py"))
        for name in imported(path)
        if name.startswith(ABOVE)
    }
    assert not upward, sorted(upward)
