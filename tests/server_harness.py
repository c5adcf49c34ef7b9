"""Helpers for the HTTP service tests (no tests here): a real uvicorn server in a thread, and token minting."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import uvicorn
from fastapi import FastAPI

from anaphora import FakeChatModel, Settings
from anaphora.app import Components, build_components
from anaphora.models.base import ChatStream
from anaphora.models.fake import echo_first_context
from anaphora.server import create_app
from anaphora.server.turns import TurnRunner
from tests.conftest import SAMPLE_DOCS

SECRET = "test-secret-that-is-long-enough-for-hs256!"


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "chat_model": "fake",
        "embedder": "hashing",
        "similarity_threshold": 0.0,  # the hashing embedder's cosines are not calibrated like MiniLM's
        "rewriter": "expansion",  # model-free, so the fake model sees answer prompts only
        "jwt_secret": SECRET,
        "shutdown_grace_s": 10.0,
    }
    values.update(overrides)
    return Settings(**values)


def token(sub: str = "alice", *, key: Any = SECRET, algorithm: str = "HS256", ttl_s: float = 300, **claims) -> str:
    payload = {"sub": sub, "exp": int(time.time() + ttl_s), "iat": int(time.time()), **claims}
    return jwt.encode(payload, key, algorithm=algorithm)


def bearer(sub: str = "alice", **kwargs) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(sub, **kwargs)}"}


def components_for(settings: Settings, model: FakeChatModel | None = None, *, ingest: bool = True) -> Components:
    components = build_components(settings, model=model or FakeChatModel())
    if ingest:
        components.ingestor.run([SAMPLE_DOCS])
    return components


class SlowModel(FakeChatModel):
    """Answers in several sentences, streamed a word at a time with a pause: a turn that takes a while."""

    def __init__(self, pause_s: float = 0.03, **kwargs: Any) -> None:
        super().__init__(default=self.long_answer, **kwargs)
        self.pause_s = pause_s

    @staticmethod
    def long_answer(messages) -> str:
        return "First sentence here. Second sentence here. Third sentence here. " + echo_first_context(messages)

    def stream(self, messages, options):
        return ChatStream(lambda usage: self._paced(messages, options))

    async def _paced(self, messages, options):
        reply = await self.chat(messages, options)
        for piece in re.findall(r"\S+\s*", reply.text):
            await asyncio.sleep(self.pause_s)
            yield piece


@dataclass
class Running:
    url: str
    server: uvicorn.Server
    thread: threading.Thread
    components: Components
    app: FastAPI

    @property
    def runner(self) -> TurnRunner:
        return self.app.state.service.runner

    def client(self, sub: str | None = "alice", **kwargs) -> httpx.Client:
        headers = bearer(sub) if sub is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the server did not shut down"


@contextmanager
def serve(settings: Settings, components: Components | None = None, *, app_builds: bool = False) -> Iterator[Running]:
    """Run create_app(settings, components) under uvicorn on 127.0.0.1 and a free port; stop it afterwards.
    With ``app_builds`` the app builds (and closes) its own components."""
    if app_builds:
        app = create_app(settings)
    else:
        components = components or components_for(settings)
        app = create_app(settings, components=components)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=settings.server.shutdown_grace_s,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    running = Running(f"http://127.0.0.1:{port}", server, thread, app.state.service.components, app)
    try:
        yield running
    finally:
        if thread.is_alive():
            running.stop()
        sock.close()
        if not app_builds:
            running.components.database.close()


def sse_events(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE response, JSON-decoded ("[DONE]" kept as a string)."""
    events: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events
