"""The package's shape. Its imports form no cycle, function-local ones included (an import inside a function is a
cycle postponed, not removed): each layer imports only the ones below it; only ``if TYPE_CHECKING:`` imports, which
never run, are left out. No function is over 60 lines or 8 parameters (a CLI command's parameters are its options:
those are counted in lines only)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
SRC = Path(__file__).resolve().parents[2] / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def _runtime_nodes(node: ast.AST):
    """Every node under ``node`` but those of ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            yield from (n for orelse in child.orelse for n in [orelse, *_runtime_nodes(orelse)])  # type: ignore[attr-defined]
            continue
        yield child
        yield from _runtime_nodes(child)


def imports(path: Path, known: set[str]) -> set[str]:
    """anaphora modules ``path`` imports, at module level or inside functions (not under ``if TYPE_CHECKING``)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _runtime_nodes(tree):
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
    graph = {name: imports(path, known) for name, path in paths.items()}
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


MAX_LINES, MAX_PARAMETERS = 60, 8


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's parameters, ``self`` and ``cls`` not counted (``*args`` and ``**kwargs`` count one each)."""
    arguments = node.args
    names = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    count = len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)
    return count - (1 if names and names[0].arg in ("self", "cls") else 0)


def command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A typer command (``@app.command(...)``): its parameters are the command line's options."""
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
        for d in node.decorator_list
    )


def test_no_function_is_over_60_lines_or_8_parameters() -> None:
    """A function that long, or taking that much, is several functions (or a value object) waiting to be named."""
    found = []
    for path in sorted((SRC / "anaphora").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES or (parameters(node) > MAX_PARAMETERS and not command(node)):
                    where = f"{path.relative_to(SRC)}:{node.lineno} {node.name}"
                    found.append(f"{where}: {lines} lines, {parameters(node)} parameters")
    assert not found, "\n".join(found)


# The layers, lowest first: a package never imports one above it (function-local imports included). ``reading``
# holds every rule that reads the user's words, ``answering`` the answer strategies; both sit below the stages of
# ``pipeline`` and take explicit arguments, not the turn's state.
TOP = {"pipeline", "server", "cli", "app", "evaluation", "testing"}
NEVER_IMPORTS = {
    "retrieval": TOP | {"reading", "answering", "memory"},
    "embeddings": TOP | {"reading", "answering", "memory"},
    "models": TOP | {"reading", "answering", "memory"},
    "reading": TOP | {"answering", "memory", "store"},
    "answering": TOP | {"memory", "store"},
    "memory": TOP,
    "store": TOP,
}


def test_no_layer_imports_one_above_it() -> None:
    paths = {module_name(p): p for p in (SRC / "anaphora").rglob("*.py")}
    known = set(paths)
    upward = []
    for name, path in sorted(paths.items()):
        layer = name.split(".")[1] if "." in name else ""
        for imported in sorted(imports(path, known)):
            target = imported.split(".")[1] if "." in imported else imported
            if target in NEVER_IMPORTS.get(layer, ()):
                upward.append(f"{name} -> {imported}")
    assert not upward, "\n".join(upward)


def test_the_pipeline_keeps_the_runtime_and_the_stages_only() -> None:
    """The turn's runtime and its stage classes; rules that read text live in ``reading``, answer strategies in
    ``answering``."""
    files = sorted(p.name for p in (SRC / "anaphora" / "pipeline").glob("*.py"))
    assert len(files) <= 15, files
