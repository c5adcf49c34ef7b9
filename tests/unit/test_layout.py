"""The unit tests mirror the package: a test lives in the folder of the package it tests (tests/unit/server/ for
anaphora.server, tests/unit/core/ for the top-level modules), so the top level keeps only the repository-wide checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

UNIT = Path(__file__).resolve().parent
TOP_LEVEL_LIMIT = 30
# Checks about the repository as a whole (docs, the import graph, this layout), not about one package.
REPOSITORY_WIDE = {"test_docs.py", "test_import_graph.py", "test_layout.py"}
# Test folders with no package of the same name in src/anaphora.
NOT_PACKAGES = {"core"}


def test_the_top_level_holds_at_most_30_files() -> None:
    files = sorted(p.name for p in UNIT.iterdir() if p.is_file())
    assert len(files) <= TOP_LEVEL_LIMIT, f"tests/unit has {len(files)} files at its top level: {files}"


def test_package_tests_live_in_their_package_folder() -> None:
    stray = sorted(p.name for p in UNIT.glob("test_*.py") if p.name not in REPOSITORY_WIDE)
    assert not stray, f"move these into the folder of the package they test (e.g. tests/unit/server/): {stray}"


def test_every_test_folder_is_a_package_named_after_one() -> None:
    """Folders are packages (an __init__.py each) so two test files may share a name; each mirrors a package."""
    packages = {p.parent.name for p in (ROOT / "src" / "anaphora").glob("*/*.py")}
    for folder in (p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"
        top = folder.relative_to(UNIT).parts[0]
        assert top in packages | NOT_PACKAGES, f"tests/unit/{top}/ mirrors no package of src/anaphora"
