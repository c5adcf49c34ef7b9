"""A folder's published URL is kept with the folder: given once (flag or setting), it stays across re-ingests;
without one, citations are as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from anaphora import Anaphora
from anaphora.ingest.sources import CitationLinks
from anaphora.types import Citation

pytestmark = pytest.mark.unit
BASE = "https://docs.example.com/"


def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "setup").mkdir(parents=True)
    (folder / "setup" / "install.md").write_text("# Install\n\nIntro.\n\n## With Helm {#helm}\n\nRun helm install.\n")
    (folder / "_index.md").write_text("# Home\n\nWelcome to the docs of Kestrel.\n")
    return folder


def cite(rag: Anaphora, heading: str) -> str | None:
    [linked] = CitationLinks(rag.sources.registry)([Citation(id="x", source="setup/install.md", heading=heading)])
    return linked.url


def test_the_base_url_is_kept_across_reingests_and_absent_without_one(tmp_path: Path) -> None:
    folder = docs(tmp_path)
    with Anaphora(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing") as rag:
        rag.ingest([folder])
        assert cite(rag, "Install > With Helm") is None  # no base URL: nothing changes
        rag.ingest([folder], base_url=BASE)
        assert cite(rag, "Install > With Helm") == BASE + "setup/install/#helm"  # detected: Hugo (_index.md)
        assert cite(rag, "Install") == BASE + "setup/install/"
        (folder / "setup" / "install.md").write_text("# Install\n\n## With Helm {#helm-3}\n\nRun helm upgrade.\n")
        rag.ingest([folder])  # no flag: the stored base URL, and the new heading id
        assert cite(rag, "Install > With Helm") == BASE + "setup/install/#helm-3"
        [source] = rag.sources.registry.sources()
        assert source.kind == "folder" and source.base_url == BASE and source.generator == "hugo"


def test_the_base_urls_setting_names_a_folders_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = docs(tmp_path)
    monkeypatch.chdir(tmp_path)
    settings = {"base_urls": {"docs": BASE}}
    with Anaphora(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing", **settings) as rag:
        rag.ingest([folder], generator="gitbook")
        assert cite(rag, "Install > With Helm") == BASE + "setup/install#helm"
