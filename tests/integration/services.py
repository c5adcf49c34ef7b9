"""Helpers for tests that run `anaphora serve` as child processes (no tests here): start one on a free loopback
port with settings from the environment, wait until it is ready, kill it (SIGKILL, like a crash) or stop it.

Children get only the ANAPHORA_* variables a test names (the developer's own are dropped) and run in a folder of
their own, so no ./anaphora.toml leaks in. Their output goes to a log file that failures quote."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from anaphora import Anaphora, Settings
from tests.conftest import SAMPLE_DOCS
from tests.server_harness import SECRET, bearer

START_TIMEOUT_S = 120.0  # a loaded 2-core machine can take a while to import and warm up


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_settings(data_dir: Path, **values: Any) -> dict[str, str]:
    """ANAPHORA_* variables for a fast child: fake model, hashing embedder, model-free rewriter, JWT auth."""
    settings = {
        "data_dir": str(data_dir),
        "chat_model": "fake",
        "embedder": "hashing",
        "similarity_threshold": "0",
        "rewriter": "expansion",
        "jwt_secret": SECRET,
        "shutdown_grace_s": "5",
        "history_sweep_interval_s": "3600",
    }
    settings.update({name: str(value) for name, value in values.items()})
    return {f"ANAPHORA_{name.upper()}": value for name, value in settings.items()}


def ingest_corpus(data_dir: Path) -> None:
    """Ingest the sample documents into ``data_dir`` (each replica has its own corpus and indexes)."""
    settings = Settings(data_dir=data_dir, chat_model="fake", embedder="hashing", similarity_threshold=0.0)
    with Anaphora(settings) as rag:
        rag.ingest([SAMPLE_DOCS])


@dataclass
class ServiceProcess:
    env: dict[str, str]
    workdir: Path
    name: str = "service"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    ready_path = "/readyz"  # answers 200 once the service is ready

    def command(self) -> list[str]:
        return [sys.executable, "-m", "anaphora", "serve"]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANAPHORA_")}
        env.update(self.env)
        env["ANAPHORA_SERVER_PORT"] = str(self.port)
        env["ANAPHORA_SERVER_HOST"] = "127.0.0.1"
        return env

    def start(self) -> Self:
        """Start the service (`anaphora serve`; on the same port each time) and wait until ``ready_path`` answers
        200."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with self.log_path.open("a") as log:
            log.write(f"\n--- start {self.starts} ---\n")
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), cwd=self.workdir, env=self.environment(), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}{self.ready_path}", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"{self.name} was not ready within {START_TIMEOUT_S} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no draining, exactly like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), killed if it takes too long."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, sub: str = "alice", **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=bearer(sub), timeout=60, **kwargs)

    def async_client(self, sub: str = "alice", **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=bearer(sub), timeout=60, **kwargs)
