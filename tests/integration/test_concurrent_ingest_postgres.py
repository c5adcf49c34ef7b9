"""Two `anaphora ingest` processes writing different folders into one PostgreSQL at the same time: every file of
both folders is indexed once with all its passages, none lost and none duplicated, even where the two folders hold
files of the same names (whose passage ids clash: the later writer takes ids prefixed with its folder's name)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

FILES = 40


def folder(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir()
    for n in range(FILES):  # the same file names in both folders, different text
        sections = "\n\n".join(
            f"## Part {p}\n\n{name} page {n} part {p} describes setting {name}_{n}_{p}." for p in range(3)
        )
        (path / f"page{n:02}.md").write_text(f"# {name} {n}\n\n{sections}\n")
    (path / f"only-{name}.md").write_text(f"# Only {name}\n\nThis file exists only in {name}.\n")
    return path


def ingest(folder: Path, data_dir: Path, url: str) -> subprocess.Popen:
    env = {**os.environ, "ANAPHORA_PASSAGE_STORE": "postgres", "ANAPHORA_POSTGRES_URL": url}
    command = [sys.executable, "-m", "anaphora", "--data-dir", str(data_dir), "--embedder", "hashing"]
    command += ["--chat-model", "fake", "--set", "embed_batch_size=2", "ingest", str(folder)]  # small windows
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_processes_ingesting_into_one_postgres_lose_and_duplicate_nothing(new_database, tmp_path: Path) -> None:
    url = new_database()
    alpha, beta = folder(tmp_path, "alpha"), folder(tmp_path, "beta")
    processes = [ingest(alpha, tmp_path / "a", url), ingest(beta, tmp_path / "b", url)]
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    with psycopg.connect(url) as conn:
        documents = conn.execute("SELECT root, source, chunk_count, id FROM documents").fetchall()
        counted = dict(conn.execute("SELECT document_id, COUNT(*) FROM passages GROUP BY document_id").fetchall())
        ids = [row[0] for row in conn.execute("SELECT id FROM passages").fetchall()]
    by_root: dict[str, set[str]] = {}
    for root, source, chunk_count, document_id in documents:
        by_root.setdefault(Path(root).name, set()).add(source)
        assert counted.get(document_id) == chunk_count > 0, (root, source)
    expected = {f"page{n:02}.md" for n in range(FILES)}
    assert by_root == {"alpha": expected | {"only-alpha.md"}, "beta": expected | {"only-beta.md"}}
    assert len(ids) == len(set(ids)) == sum(counted.values())
    prefixed = [i for i in ids if i.startswith(("alpha/", "beta/"))]
    assert len(prefixed) == len(ids) - len([i for i in ids if i.startswith("page") or i.startswith("only-")])
    assert {i.split("#")[0] for i in ids if i.startswith("page")} == expected  # one folder kept the bare ids


def test_a_write_whose_ids_another_document_took_is_refused_whole(new_database) -> None:
    import numpy as np

    from anaphora.errors import PassageIdTakenError
    from anaphora.store.postgres_passages import PostgresPassageStore
    from anaphora.store.protocols import DocumentVersion
    from anaphora.types import Chunk

    store = PostgresPassageStore(new_database(), embedder_name="e", dim=4)
    try:
        vector = np.ones((1, 4), dtype=np.float32)
        store.replace_document("/a", "x.md", "h", [Chunk(id="x#1", text="t", source="x.md", ordinal=1)], vector, "e")
        fine = DocumentVersion("/b", "z.md", "h", [Chunk(id="z#1", text="v", source="z.md", ordinal=1)], vector)
        clash = DocumentVersion("/b", "y.md", "h", [Chunk(id="x#1", text="u", source="y.md", ordinal=1)], vector)
        with pytest.raises(PassageIdTakenError):
            store.replace_documents([fine, clash], "e")
        assert [d.source for d in store.documents()] == ["x.md"]
        store.replace_documents([fine], "e")
        assert sorted(d.source for d in store.documents()) == ["x.md", "z.md"]
    finally:
        store.close()
