"""The package's module-level imports form no cycle: each layer imports only the ones below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
SRC = Path(__file__).resolve().parents[2] / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path, known: set[str]) -> set[str]:
    """anaphora modules imported when ``path`` is imported (not under ``if TYPE_CHECKING`` nor inside functions)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("anaphora"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("anaphora"))
    return {name for name in found if name in known}


def test_no_import_cycle() -> None:
    paths = {module_name(p): p for p in (SRC / "anaphora").rglob("*.py")}
    known = set(paths)
    graph = {name: top_level_imports(path, known) for name, path in paths.items()}
    # a package's own __init__ importing its submodules is not a cycle of the submodules with it
    graph = {name: {d for d in deps if not name.startswith(d + ".")} for name, deps in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*trail[trail.index(dep) :], dep] if dep in trail else [node, dep])
            elif dep not in state:
                visit(dep, [*trail, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles[:10])
