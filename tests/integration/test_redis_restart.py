"""A Redis restart under a running service (issue 25): the first turn after it got one 503 from a pooled
connection the old server had closed. Pooled connections are now checked before reuse (store/redis_store.py).

The test runs a Redis server of its own on a free port, kills it and starts a new one there: the shared Redis at
6379 is never restarted."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import unavailable
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnRedis:
    def __init__(self, folder: Path) -> None:
        self.folder, self.port, self.process = folder, free_port(), None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> OwnRedis:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen([*command, "--dir", str(self.folder)], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed (Debian: apt-get install -y redis-server)")
    server = OwnRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.kill()


def turn(http, conversation: str) -> None:
    response = http.post(f"/v1/conversations/{conversation}/messages", json={"content": "How do I install Kestrel?"})
    assert response.status_code == 200, response.text


def test_the_first_turn_after_a_redis_restart_succeeds(tmp_path: Path, redis_server: OwnRedis) -> None:
    settings = settings_for(tmp_path, conversation_store="redis", redis_url=redis_server.url, session_store="redis")
    with serve(settings, components_for(settings)) as running, running.client() as http:
        first = http.post("/v1/conversations", json={}).json()["id"]
        turn(http, first)
        for _ in range(2):  # twice: the connections made after the first restart are stale after the second
            redis_server.kill()
            redis_server.start()  # empty: nothing was saved, the service must simply go on
            time.sleep(0.1)
            created = http.post("/v1/conversations", json={})
            assert created.status_code == 201, created.text
            turn(http, created.json()["id"])
        assert http.get(f"{running.url}/readyz").status_code == 200
