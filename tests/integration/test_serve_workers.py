"""`anaphora serve --workers N`: several processes behind one port on one store, refused unless what orders a
conversation's turns and the sessions are shared between them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DOCS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

httpx = pytest.importorskip("httpx")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "ANAPHORA_AUTH": "none",
        **extra,
    }


def test_several_workers_need_a_shared_turn_lock(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "anaphora", "serve", "--workers", "2", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=environment(tmp_path),
        timeout=120,
    )
    assert done.returncode == 1
    assert "turn lock 'process'" in done.stderr and "ANAPHORA_TURN_LOCK=redis" in done.stderr


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_two_workers_serve_one_port_and_one_store(tmp_path: Path, sync_redis, prefix: str) -> None:
    env = environment(
        tmp_path,
        ANAPHORA_TURN_LOCK="redis",
        ANAPHORA_SESSION_STORE="redis",
        ANAPHORA_REDIS_URL="redis://127.0.0.1:6379/0",
        ANAPHORA_REDIS_KEY_PREFIX=prefix,
        ANAPHORA_MAX_CONCURRENT_TURNS_PER_USER="16",
    )
    subprocess.run([sys.executable, "-m", "anaphora", "ingest", str(SAMPLE_DOCS)], env=env, check=True, timeout=120)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "anaphora", "serve", "--workers", "2", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if http.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.3)
            else:
                pytest.fail("the server did not become ready")
            workers = children(server.pid)
            assert len([w for w in workers if Path(f"/proc/{w}/cmdline").exists()]) >= 2
            conversation = http.post("/v1/conversations", json={"title": uuid.uuid4().hex}).json()["id"]
            for question in ("How do I install it?", "and on Linux?", "what port does the service use?"):
                response = http.post(f"/v1/conversations/{conversation}/messages", json={"content": question})
                assert response.status_code == 200, response.text
            turns = http.get(f"/v1/conversations/{conversation}").json()["turns"]
            # every turn stored in the one store, in order, whichever worker ran it
            assert [t["index"] for t in turns] == [0, 1, 2]
    finally:
        server.terminate()
        server.wait(timeout=60)
